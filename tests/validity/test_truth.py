"""The client's figures against a server's ground truth, joined by X-Request-ID."""

from __future__ import annotations

from typing import Any

import pytest

from inferlab_bench.validity.truth import ClientTolerance, client_distortion, truth_rows

MS = 10**6


def _pair(i: int, ttft_ms: float, added_ms: float, tokens: int = 9) -> tuple[dict[str, Any], ...]:
    arrival = 10**18 + i * 1000 * MS
    first = arrival + int(ttft_ms * MS)
    last = first + (tokens - 1) * 10 * MS
    server = {
        "kind": "request",
        "x_request_id": f"id-{i}",
        "arrival_ns": arrival,
        "first_token_before_ns": first,
        "last_token_before_ns": last,
        "ttft_ns": first - arrival,
        "e2e_ns": last - arrival,
        "end_ns": last,
        "completion_tokens": tokens,
        "status": 200,
        "cached_tokens": 0,
    }
    client = {
        "metadata": {"x_request_id": f"id-{i}"},
        "metrics": {
            "time_to_first_token": {"value": ttft_ms + added_ms},
            "inter_token_latency": {"value": 10.0},
            "request_latency": {"value": (last - arrival) / MS + added_ms},
        },
    }
    return client, server


def test_rows_join_by_request_id_and_skip_the_unmatched_and_failed() -> None:
    pairs = [_pair(i, 50.0, 1.0) for i in range(5)]
    client = [c for c, _ in pairs] + [{"metadata": {"x_request_id": "nowhere"}, "metrics": {}}]
    client[0] = {**client[0], "error": {"message": "boom"}}
    rows = truth_rows(client, [s for _, s in pairs])
    assert len(rows) == 4
    assert rows[0].ttft_ms == pytest.approx(50.0) and rows[0].itl_ms == pytest.approx(10.0)
    assert rows[0].client_ttft_ms == pytest.approx(51.0)


def test_a_client_adding_one_ms_is_within_tolerance() -> None:
    pairs = [_pair(i, 50.0 + i * 0.1, 1.0) for i in range(20)]
    found = client_distortion(truth_rows([c for c, _ in pairs], [s for _, s in pairs]))
    assert found.added_ms["ttft_p90"] == pytest.approx(1.0)
    assert found.allowed_ms["ttft_p90"] == pytest.approx(3.0)  # max(3 ms, 5% of ~52 ms)
    assert not found.beyond_tolerance and "within tolerance" in found.sentence()


def test_a_late_reader_is_beyond_it_and_the_sentence_says_by_how_much() -> None:
    pairs = [_pair(i, 50.0, 30.0 if i % 2 else 0.0) for i in range(20)]
    found = client_distortion(truth_rows([c for c, _ in pairs], [s for _, s in pairs]))
    assert found.beyond_tolerance
    assert found.added_ms["ttft_p90"] == pytest.approx(30.0)
    assert "+30.00 ms to TTFT p90" in found.sentence() and "beyond tolerance" in found.sentence()


def test_the_relative_part_governs_long_latencies() -> None:
    pairs = [_pair(i, 400.0, 15.0) for i in range(10)]
    rows = truth_rows([c for c, _ in pairs], [s for _, s in pairs])
    found = client_distortion(rows, ClientTolerance(floor_ms=3.0, relative=0.05))
    assert found.allowed_ms["ttft_p90"] == pytest.approx(20.0) and not found.beyond_tolerance


def _parsed_late(i: int, parse_ms: float, read_late_ms: float) -> tuple[dict[str, Any], ...]:
    """The client wrote its first byte at its start; the server, waiting for a core, parsed
    the request ``parse_ms`` later and kept its own TTFT from there; the client read its
    first token ``read_late_ms`` after the server wrote it."""
    client, server = _pair(i, 50.0, 0.0)
    start = server["arrival_ns"] - int(parse_ms * MS)
    client["metadata"]["request_start_ns"] = start
    waited = (server["first_token_before_ns"] - start) / MS
    client["metrics"]["time_to_first_token"]["value"] = waited + read_late_ms
    client["metrics"]["request_latency"]["value"] = (server["end_ns"] - start) / MS
    return client, server


@pytest.mark.parametrize(("read_late_ms", "beyond"), [(0.0, False), (8.0, True)])
def test_a_server_s_wait_to_parse_is_its_own_from_the_client_s_first_byte(
    read_late_ms: float, beyond: bool
) -> None:
    """Against its arrival stamp a server that parsed 5 ms late makes the client look 5 ms
    slow; from the client's first byte written that wait is the server's, and a late read
    still shows."""
    pairs = [_parsed_late(i, 5.0, read_late_ms) for i in range(20)]
    client, server = [c for c, _ in pairs], [s for _, s in pairs]
    from_arrival = client_distortion(truth_rows(client, server))
    assert from_arrival.added_ms["ttft_p90"] == pytest.approx(5.0 + read_late_ms)
    assert from_arrival.beyond_tolerance
    from_start = client_distortion(truth_rows(client, server, from_client_start=True))
    assert from_start.added_ms["ttft_p90"] == pytest.approx(read_late_ms)
    assert from_start.added_ms["e2e_p90"] == pytest.approx(0.0)
    assert from_start.beyond_tolerance is beyond

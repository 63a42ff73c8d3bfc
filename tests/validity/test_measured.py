"""Verdicts decided by the server's truth: client-added latency, arrival lateness, cached tokens.

Each test sets the proxies and the truth against each other, so that the verdict can only be
right if it follows the truth: proxies failing while the truth is within tolerance, and the
other way round.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from inferlab_bench.protocol import ConcurrencyLimited
from inferlab_bench.validity import CaseFacts, Verdict, assess
from inferlab_bench.validity.client_cost import ClientUsage
from inferlab_bench.validity.inputs import PhaseRecords
from inferlab_bench.validity.report import summary_lines
from tests.validity.builders import MS, T0, records

N = 40
TOKENS = 10
ITL_MS = 15.0
LOAD = ConcurrencyLimited(kind="concurrency_limited", concurrency=1)


def client(
    ttft_ms: float, *, ttst_ms: float = ITL_MS, issued_before_ms: float = 1.0
) -> PhaseRecords:
    """Requests back to back (concurrency 1), each as the client measured it, with an
    X-Request-ID."""
    duration = int((ttft_ms + (TOKENS - 1) * ITL_MS) * MS)
    starts = T0 + np.arange(N, dtype=np.int64) * (duration + 2 * MS)
    base = records(
        starts,
        starts + duration,
        issued_ns=starts - int(issued_before_ms * MS),
        ttft_ms=ttft_ms,
        itl_ms=ITL_MS,
        ttst_ms=ttst_ms,
    )
    return dataclasses.replace(
        base,
        latency_ms=np.full(N, ttft_ms + (TOKENS - 1) * ITL_MS),
        request_ids=tuple(f"rid-{i}" for i in range(N)),
    )


def server(
    profiling: PhaseRecords, ttft_ms: float, *, arrival_after_ms: float = 0.3, cached: int = 0
) -> list[dict[str, Any]]:
    """The server's records of the same requests: arrival, first and last token writes."""
    out = []
    assert profiling.request_ids is not None
    for i, rid in enumerate(profiling.request_ids):
        arrival = int(profiling.start_ns[i]) + int(arrival_after_ms * MS)
        first = arrival + int(ttft_ms * MS)
        last = first + int((TOKENS - 1) * ITL_MS * MS)
        out.append(
            {
                "kind": "request",
                "x_request_id": rid,
                "arrival_ns": arrival,
                "first_token_before_ns": first,
                "last_token_before_ns": last,
                "ttft_ns": first - arrival,
                "e2e_ns": last - arrival,
                "end_ns": last,
                "completion_tokens": TOKENS,
                "status": 200,
                "cached_tokens": cached if i == 0 else 0,
            }
        )
    return out


def usage() -> ClientUsage:
    times = T0 - 10**9 + np.arange(0, 200) * 100 * MS
    return ClientUsage(
        time_ns=tuple(int(t) for t in times),
        cpu_seconds=tuple(float(c) for c in (times - times[0]) / 1e9 * 0.05),
        runnable=(1,) * len(times),
        host_cores=2,
        server_on_this_host=True,
    )


def judge(profiling: PhaseRecords, truth: list[dict[str, Any]] | None, **facts: Any) -> Any:
    return assess(
        profiling,
        None,
        CaseFacts(
            load=LOAD,
            client_usage=usage(),
            server_truth=None if truth is None else tuple(truth),
            **facts,
        ),
    )


def test_late_reads_the_truth_does_not_see_pass_and_say_what_the_proxies_said() -> None:
    # The client read its first two tokens together (the read-late proxy fails), but the
    # server wrote them late and together: the client added 0.5 ms.
    profiling = client(60.5, ttst_ms=1.0)
    doc = judge(profiling, server(profiling, 60.0))
    assert doc.verdicts["client_cost_low"] is Verdict.PASS
    assert doc.measured.by_proxies["client_cost_low"] is Verdict.FAIL
    assert [c.name for c in doc.client_cost.checks] == ["client_added_latency_ms"]
    sentence = doc.explanations["client_cost_low"]
    assert "the client added +0.50 ms to" in sentence and "within max(3 ms, 5%)" in sentence
    assert "alone they would have said fail" in sentence
    assert doc.failed() == []


def test_a_client_adding_ten_ms_fails_though_every_proxy_passes() -> None:
    profiling = client(70.0)
    doc = judge(profiling, server(profiling, 60.0))
    assert doc.measured.by_proxies["client_cost_low"] is Verdict.PASS
    assert doc.verdicts["client_cost_low"] is Verdict.FAIL
    assert doc.measured.client_added_ms["ttft_p90"] == 10.0
    sentence = doc.explanations["client_cost_low"]
    assert "the client added +10.00 ms to TTFT" in sentence
    assert "beyond max(3 ms, 5%) = 3.00 ms" in sentence
    assert any(
        "measured: against the simulator's ground truth" in line for line in summary_lines(doc)
    )


def test_requests_that_reached_the_server_late_fail_load_generator_kept_up() -> None:
    # AIPerf's own stamps say it sent 1 ms after deciding; the server saw them 80 ms later.
    profiling = client(60.0)
    doc = judge(profiling, server(profiling, 59.0, arrival_after_ms=80.0))
    assert doc.measured.by_proxies["load_generator_kept_up"] is Verdict.PASS
    assert doc.verdicts["load_generator_kept_up"] is Verdict.FAIL
    assert "reached the server 81 ms (p95)" in doc.explanations["load_generator_kept_up"]
    assert "dispatch_delay_p95_ms" in {c.name for c in doc.measured.proxy_checks}


def test_a_dispatch_delay_the_server_did_not_see_beyond_its_bound_passes() -> None:
    profiling = client(60.0, issued_before_ms=20.0)
    doc = judge(profiling, server(profiling, 59.5))
    assert doc.verdicts["load_generator_kept_up"] is Verdict.PASS
    assert "within 50 ms (the simulator's truth)" in doc.explanations["load_generator_kept_up"]


def test_cache_cold_follows_the_cached_tokens_the_server_counted() -> None:
    profiling = client(60.0)  # the client's records say nothing was cached
    doc = judge(profiling, server(profiling, 59.5, cached=64), reset_requested=True)
    assert doc.measured.by_proxies["cache_cold"] is Verdict.PASS
    assert doc.measured.first_wave_cached_tokens == 64
    assert doc.verdicts["cache_cold"] is Verdict.FAIL
    assert "the first wave found 64 cached tokens" in doc.explanations["cache_cold"]


def test_without_the_truth_the_sentence_names_the_bound_the_proxies_were_calibrated_for() -> None:
    profiling = client(60.0)
    doc = judge(profiling, None)
    assert doc.measured is None
    assert doc.verdicts["client_cost_low"] is Verdict.PASS
    assert (
        "fail when the client adds more than max(3 ms, 5%) to TTFT p90"
        in (doc.explanations["client_cost_low"])
    )


def test_records_without_request_ids_join_nothing_and_keep_the_proxies() -> None:
    profiling = client(60.0)
    truth = server(profiling, 50.0)
    doc = judge(dataclasses.replace(profiling, request_ids=None), truth)
    assert doc.measured is None
    assert doc.client_cost.checks[0].name != "client_added_latency_ms"


def test_a_truth_missing_a_succeeded_request_is_not_used() -> None:
    # The simulator keeps its latest records only: a case older than them, or a first wave
    # it dropped, must not be judged on the rest (cache_cold looks at the first wave).
    profiling = client(60.0)
    truth = server(profiling, 50.0, cached=500)
    assert judge(profiling, truth).measured is not None
    doc = judge(profiling, truth[1:])
    assert doc.measured is None
    assert doc.client_cost.checks[0].name != "client_added_latency_ms"


def test_the_page_shows_a_failed_verdict_with_its_measured_sentence() -> None:
    from types import SimpleNamespace

    from inferlab_bench.publish.html import _validity_parts

    profiling = client(70.0)
    doc = judge(profiling, server(profiling, 60.0)).to_json_dict()
    shown = "".join(
        p if isinstance(p, str) else p.text
        for p in _validity_parts(SimpleNamespace(validity=doc))  # type: ignore[arg-type]
    )
    assert "client_added_latency_ms 10 (bound 3)" in shown
    assert "the client added +10.00 ms to TTFT" in shown

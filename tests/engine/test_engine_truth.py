"""The llama.cpp calibration's scoring (benchmarks/calibrate_engine.py), on recorded rows.

Pure: AIPerf records and raw-export lines shaped as AIPerf 0.13 writes them against
llama-server (its stream's last chunk carries ``timings``), no server needed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
import pytest

from benchmarks.calibrate import Run
from benchmarks.calibrate_engine import (
    EngineRow,
    client_distorted,
    engine_rows,
    first_wave_cached,
    null_level,
    rescore,
    residual_figures,
    stream_timings,
)


def _client(rid: str, ttft: float, itl: float, e2e: float, phase: str = "profiling") -> Any:
    return {
        "metadata": {"x_request_id": rid, "benchmark_phase": phase, "request_start_ns": 1},
        "metrics": {
            "time_to_first_token": {"value": ttft, "unit": "ms"},
            "inter_token_latency": {"value": itl, "unit": "ms"},
            "request_latency": {"value": e2e, "unit": "ms"},
        },
        "error": None,
    }


def _raw(rid: str, timings: dict[str, Any] | None) -> Any:
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
        {"choices": [{"index": 0, "delta": {"content": " the"}}]},
        {"choices": [{"finish_reason": "length", "index": 0, "delta": {}}]},
    ]
    # As llama-server writes it: the timings ride on the usage chunk, the last before [DONE].
    chunks.append({"choices": [], "usage": {"prompt_tokens": 200, "completion_tokens": 32}})
    if timings is not None:
        chunks[-1]["timings"] = timings
    packets = [{"name": "data", "value": orjson.dumps(c).decode()} for c in chunks]
    packets.append({"name": "data", "value": "[DONE]"})
    return {
        "metadata": {"x_request_id": rid, "benchmark_phase": "profiling"},
        "status": 200,
        "responses": [{"perf_ns": i, "packets": [p]} for i, p in enumerate(packets)],
    }


TIMINGS = {"cache_n": 0, "prompt_n": 200, "prompt_ms": 5.0, "predicted_n": 32}


def test_timings_come_from_the_stream_and_join_by_request_id() -> None:
    raw = [_raw("a", {**TIMINGS, "predicted_ms": 62.0}), _raw("b", None)]
    assert stream_timings(raw[0]) == {**TIMINGS, "predicted_ms": 62.0}
    assert stream_timings(raw[1]) is None
    client = [
        _client("w", 1.0, 1.0, 1.0, phase="warmup"),  # warmup: not scored, not missing
        _client("b", 9.0, 2.1, 80.0),  # no timings: counted missing
        _client("a", 8.0, 2.1, 71.0),
    ]
    rows, missing = engine_rows(client, raw)
    assert missing == 1
    [row] = rows
    # TTFT - prompt_ms, ITL - predicted_ms/(n-1), E2E - (prompt_ms + predicted_ms),
    # decode: E2E - TTFT - predicted_ms
    assert row.residual == pytest.approx({"ttft": 3.0, "itl": 0.1, "e2e": 4.0, "decode": 1.0})


def _row(residual_ttft: float, compute_ttft: float = 5.0, itl_extra: float = 0.0) -> EngineRow:
    return EngineRow(
        start_ns=0,
        client_ttft_ms=compute_ttft + residual_ttft,
        client_itl_ms=2.0 + itl_extra,
        client_e2e_ms=compute_ttft + 62.0 + residual_ttft,  # ITL alone: E2E untouched
        prompt_ms=compute_ttft,
        predicted_ms=62.0,
        predicted_n=32,
        cache_n=0,
    )


def _run(kind: str, rows: list[EngineRow], queued: bool = False) -> Run:
    truth = {**residual_figures(rows), "queued": queued}
    return Run("x", kind, 0.0, 0.0, {}, {}, truth, {}, None)


def test_distorted_means_beyond_the_null_level_by_more_than_the_tolerance() -> None:
    base = [_row(1.0)] * 10
    nulls = [_run("null", base), _run("null", [_row(1.4)] * 10), _run("null", [_row(9.0)] * 10)]
    level = null_level([*nulls, _run("client", [_row(50.0)] * 10)])  # only nulls count
    assert level["ttft_p90_ms"] == pytest.approx(1.4)  # the median of the three
    # 3 ms floor above the level: +2.9 within, +3.2 distorted.
    assert not client_distorted(_run("client", [_row(1.4 + 2.9)] * 10).truth, level)
    assert client_distorted(_run("client", [_row(1.4 + 3.2)] * 10).truth, level)
    # 5% of a 100 ms prompt pass allows 5 ms: +4 within, +6 distorted.
    assert not client_distorted(_run("client", [_row(5.4, 100.0)] * 10).truth, level)
    assert client_distorted(_run("client", [_row(7.4, 100.0)] * 10).truth, level)
    # Only the slowest tenth late: p90 decides (numpy's linear interpolation reaches it).
    tail = [_row(1.4)] * 8 + [_row(30.0)] * 2
    assert client_distorted(_run("client", tail).truth, level)
    # ITL: a 0.5 ms floor.
    assert not client_distorted(_run("client", [_row(1.4, itl_extra=0.4)] * 10).truth, level)
    assert client_distorted(_run("client", [_row(1.4, itl_extra=0.6)] * 10).truth, level)


def test_a_queue_is_scored_on_itl_and_the_decode() -> None:
    level = null_level([_run("null", [_row(1.0)] * 10)])
    waited = [_row(40.0)] * 10  # the wait for a slot is in TTFT and E2E
    assert client_distorted(_run("server", waited).truth, level)
    assert not client_distorted(_run("server", waited, queued=True).truth, level)
    late = [_row(40.0, itl_extra=1.0)] * 10
    assert client_distorted(_run("server", late, queued=True).truth, level)
    # The last token read 10 ms late after a queued first one: the decode residual shows it.
    read_late = [replace(r, client_e2e_ms=r.client_e2e_ms + 10.0) for r in waited]
    assert client_distorted(_run("server", read_late, queued=True).truth, level)


def test_rescore_sets_every_true_state_and_the_overall_one() -> None:
    runs = [_run("null", [_row(1.0)] * 10), _run("client", [_row(20.0)] * 10)]
    for run in runs:
        run.true_state.update(cache_cold=False, requests_succeeded=False)
    rescore(runs)
    assert [r.true_state["client_cost_low"] for r in runs] == [False, True]
    assert [r.true_state["verdict"] for r in runs] == [False, True]


def test_the_first_wave_is_the_earliest_requests() -> None:
    rows = [
        EngineRow(30, 1, 1, 1, 1, 1, 2, cache_n=180),
        EngineRow(10, 1, 1, 1, 1, 1, 2, cache_n=0),
        EngineRow(20, 1, 1, 1, 1, 1, 2, cache_n=3),
    ]
    assert first_wave_cached(rows, 1) == 0
    assert first_wave_cached(rows, 2) == 3
    assert first_wave_cached(rows, 3) == 183


def test_the_null_level_is_the_one_of_the_same_load() -> None:
    """A rate's residual holds waits a concurrency's does not: each load has its own level."""
    closed = _run("null", [_row(1.0)] * 10)
    opened = _run("null", [_row(30.0)] * 10)
    closed.truth["load"], opened.truth["load"] = "--concurrency 4", "--rate 3"
    assert null_level([closed, opened], "--rate 3")["ttft_p90_ms"] == pytest.approx(30.0)
    assert null_level([closed, opened], "--concurrency 4")["ttft_p90_ms"] == pytest.approx(1.0)
    braked = _run("client", [_row(31.0)] * 10)
    braked.truth["load"] = "--rate 3"  # +1 ms over its own load's level: within
    rescore([closed, opened, braked])
    assert braked.true_state["client_cost_low"] is False

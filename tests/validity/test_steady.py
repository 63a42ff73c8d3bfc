"""Steady state: MSER-5 cuts a ramp, a trend test says a run never settled, short runs unjudged."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from inferlab_bench.validity.steady import (
    BATCH,
    MIN_BATCHES,
    batch_means,
    in_flight_during,
    mser_truncation,
    steady_state,
)
from inferlab_bench.validity.verdict import Verdict
from tests.validity.builders import MS, T0, records


def open_loop(latency_ms: np.ndarray, gap_ms: float = 20.0) -> tuple[np.ndarray, np.ndarray]:
    """Starts every ``gap_ms``, each request lasting its latency."""
    starts = T0 + (np.arange(len(latency_ms)) * gap_ms * MS).astype(np.int64)
    return starts, starts + (latency_ms * MS).astype(np.int64)


def with_latency(latency_ms: np.ndarray, gap_ms: float = 20.0) -> object:
    starts, ends = open_loop(latency_ms, gap_ms)
    base = records(starts, ends)
    return replace(base, ttft_ms=latency_ms / 4, latency_ms=latency_ms)


def test_mser_cuts_where_a_ramp_ends() -> None:
    rng = np.random.default_rng(1)
    ramp = np.linspace(200.0, 20.0, 40)
    series = np.concatenate([ramp, 20.0 + rng.normal(0, 2, 260)])
    d = mser_truncation(batch_means(series)) * BATCH
    assert 25 <= d <= 50
    # A level series is not cut at all.
    assert mser_truncation(batch_means(20.0 + rng.normal(0, 2, 300))) * BATCH <= 15


def test_in_flight_during_averages_the_others_over_each_life() -> None:
    starts = np.array([0, 0, 10, 20, 30, 30])
    ends = np.array([20, 40, 12, 40, 40, 30])
    # The first runs 0-20: the second all along, the third for 2 of its 20: 1.1 others. The
    # fourth (20-40) meets the second all along and the fifth for 10: 1.5, the first having
    # ended at 20. The sixth lasts no time: the count at its instant (second, fourth, fifth).
    assert in_flight_during(starts, ends).tolist() == pytest.approx([1.1, 1.3, 2.0, 1.5, 2.0, 3.0])


def lockstep_waves(concurrency: int, waves: int, locked: int) -> tuple[np.ndarray, np.ndarray]:
    """A closed loop beside a server that ends each wave's requests together for ``locked``
    waves (equal output lengths in one batch), then lets them drift apart: each slot sends
    again when its request ends, 80 ms per request, the drift up to 5 ms."""
    rng = np.random.default_rng(7)
    slot_free = np.zeros(concurrency)
    starts, ends = [], []
    for wave in range(waves):
        send = slot_free + np.arange(concurrency) * 0.01  # one by one, as a client sends
        drift = rng.uniform(0, 5, concurrency) if wave >= locked else np.zeros(concurrency)
        end = send.max() + 80.0 + drift
        starts += list(send)
        ends += list(end)
        slot_free = end
    s, e = np.array(starts), np.array(ends)
    return T0 + (s * MS).astype(np.int64), T0 + (e * MS).astype(np.int64)


def test_a_closed_loop_in_lockstep_waves_that_drift_apart_is_level() -> None:
    # The shape a CI run showed: 8 waves in lockstep, then drifting, 120 requests at c=8.
    starts, ends = lockstep_waves(concurrency=8, waves=15, locked=8)
    latency_ms = (ends - starts) / MS
    found = steady_state(replace(records(starts, ends), latency_ms=latency_ms))
    assert found.reached is Verdict.PASS, found.sentence
    state = next(c for c in found.cuts if c.series == "in_flight_during")
    assert state.trend_change < 0.05  # 7 others all along, locked or not
    assert found.in_flight_steady is not None and abs(found.in_flight_steady - 8) < 0.5


def test_a_run_with_a_ramp_reaches_a_steady_state_after_it() -> None:
    rng = np.random.default_rng(2)
    latency = np.concatenate([np.linspace(400.0, 60.0, 30), 60.0 + rng.normal(0, 4, 270)])
    found = steady_state(with_latency(latency))  # type: ignore[arg-type]
    assert found.reached is Verdict.PASS, found.sentence
    assert max(c.truncated_requests for c in found.cuts) >= 20
    assert found.window_start_s is not None and found.window_start_s > 0
    assert "Reached a steady state after the first" in found.sentence
    p99 = next(
        r for r in found.latencies if r.metric == "request_latency_ms" and r.percentile == 99
    )
    assert p99.steady_ms < p99.whole_run_ms  # the ramp's slow requests are left out


def test_an_overloaded_queue_never_settles() -> None:
    rng = np.random.default_rng(3)
    latency = np.linspace(50.0, 3000.0, 300) + rng.normal(0, 10, 300)  # a growing queue
    found = steady_state(with_latency(latency))  # type: ignore[arg-type]
    assert found.reached is Verdict.FAIL
    assert any(not c.settled and c.trend_p_value < 0.001 for c in found.cuts)
    assert found.sentence.startswith("Never reached a steady state")
    assert found.latencies == ()  # no window, no window figures


def test_noise_without_a_trend_is_level() -> None:
    rng = np.random.default_rng(4)
    latency = 60.0 + rng.exponential(20.0, 300)  # heavy-tailed but level
    assert steady_state(with_latency(latency)).reached is Verdict.PASS  # type: ignore[arg-type]


def test_a_run_too_short_is_not_judged() -> None:
    n = BATCH * MIN_BATCHES - 1
    found = steady_state(with_latency(np.full(n, 30.0)))  # type: ignore[arg-type]
    assert found.reached is Verdict.UNKNOWN
    assert (
        f"of {n} requests" in found.sentence and f"at least {BATCH * MIN_BATCHES}" in found.sentence
    )


def test_the_drain_after_the_last_send_is_left_out() -> None:
    # A closed loop's last requests run on alone, faster: that is the drain, not a trend.
    rng = np.random.default_rng(5)
    latency = 100.0 + rng.normal(0, 3, 200)
    starts, ends = open_loop(latency, gap_ms=10.0)  # about 10 in flight at once
    base = replace(records(starts, ends), ttft_ms=latency / 4, latency_ms=latency)
    found = steady_state(base)
    assert found.reached is Verdict.PASS
    last_send = int(starts.max())
    assert found.requests_in_window <= int((ends <= last_send).sum())

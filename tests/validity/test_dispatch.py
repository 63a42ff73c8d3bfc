"""Dispatch fidelity: rate, dispersion, held concurrency and dispatch delay, each flipping."""

from __future__ import annotations

import math

import numpy as np
import pytest

from inferlab_bench.protocol import ConcurrencyLimited, RequestRateLimited, UnboundedRequestRate
from inferlab_bench.validity import Verdict, assess_dispatch
from inferlab_bench.validity.dispatch import (
    cv_standard_error,
    held_concurrency,
    interarrival_cv,
    mean_in_flight,
    peak_in_flight,
)
from tests.validity.builders import MS, T0, closed_loop, gamma_starts, poisson_starts, records


def rate(r: float, burstiness: float | None = None) -> RequestRateLimited:
    return RequestRateLimited(kind="request_rate_limited", request_rate=r, burstiness=burstiness)


def concurrency(c: int) -> ConcurrencyLimited:
    return ConcurrencyLimited(kind="concurrency_limited", concurrency=c)


def checks(result: object) -> dict[str, Verdict]:
    return {c.name: c.verdict for c in result.checks}  # type: ignore[attr-defined]


def test_a_poisson_schedule_kept_up() -> None:
    result = assess_dispatch(records(poisson_starts(20.0, 300)), rate(20.0))
    assert result.load_generator_kept_up is Verdict.PASS
    assert result.achieved_rate == pytest.approx(20.0, rel=0.2)
    assert result.interarrival_cv == pytest.approx(1.0, abs=0.2)


def test_a_burst_at_a_poisson_target_did_not_keep_up() -> None:
    starts = T0 + np.sort(np.random.default_rng(0).integers(0, MS, 300))
    result = assess_dispatch(records(starts), rate(20.0))
    assert result.load_generator_kept_up is Verdict.FAIL
    assert checks(result)["achieved_rate_relative_error"] is Verdict.FAIL


def test_a_client_sending_evenly_at_a_third_of_the_rate_fails_rate_and_dispersion() -> None:
    starts = T0 + np.arange(300, dtype=np.int64) * 150 * MS
    result = assess_dispatch(records(starts), rate(20.0))
    assert checks(result)["achieved_rate_relative_error"] is Verdict.FAIL
    assert checks(result)["interarrival_cv_error"] is Verdict.FAIL
    assert result.interarrival_cv == pytest.approx(0.0, abs=1e-9)


def test_gamma_dispersion_matches_its_smoothness_and_not_poisson() -> None:
    starts = gamma_starts(20.0, 4.0, 400)
    assert assess_dispatch(records(starts), rate(20.0, 4.0)).load_generator_kept_up is Verdict.PASS
    as_poisson = assess_dispatch(records(starts), rate(20.0))
    assert checks(as_poisson)["interarrival_cv_error"] is Verdict.FAIL


def test_the_dispersion_band_accounts_for_sample_size() -> None:
    few = assess_dispatch(records(gamma_starts(20.0, 2.8, 20, seed=3)), rate(20.0))
    many = assess_dispatch(records(gamma_starts(20.0, 2.8, 3000, seed=3)), rate(20.0))
    assert checks(few)["interarrival_cv_error"] is Verdict.PASS
    assert checks(many)["interarrival_cv_error"] is Verdict.FAIL


def test_cv_standard_error_matches_simulation() -> None:
    rng = np.random.default_rng(7)
    for shape in (1.0, 4.0):
        gaps = rng.gamma(shape, 1.0, (4000, 400))
        cvs = gaps.std(axis=1, ddof=1) / gaps.mean(axis=1)
        assert cvs.std() == pytest.approx(cv_standard_error(shape, 400), rel=0.1)
    assert cv_standard_error(1.0, 100) == pytest.approx(0.1)


def test_a_late_dispatch_fails_the_delay_check() -> None:
    starts = poisson_starts(20.0, 300)
    late = records(starts, issued_ns=starts - 200 * MS)
    result = assess_dispatch(late, rate(20.0))
    assert checks(result)["dispatch_delay_p95_ms"] is Verdict.FAIL
    assert result.dispatch_delay_ms is not None and result.dispatch_delay_ms.p50 == 200.0


def test_no_credit_times_make_the_delay_unknown() -> None:
    r = records(poisson_starts(20.0, 300))
    r = type(r)(**{**r.__dict__, "credit_issued_ns": None})
    result = assess_dispatch(r, rate(20.0))
    assert checks(result)["dispatch_delay_p95_ms"] is Verdict.UNKNOWN
    assert result.load_generator_kept_up is Verdict.UNKNOWN


def test_the_client_send_time_is_a_figure_not_a_check() -> None:
    """Retired: the send time as a share of a TTFT the client itself inflates. The client is
    judged by its own cost in client_cost_low (tests/validity/test_client_cost.py)."""
    starts = poisson_starts(20.0, 300)
    bursty = np.full(300, 0.7)
    bursty[::10] = 40.7
    result = assess_dispatch(records(starts, send_ms=bursty, ttft_ms=50.0), rate(20.0))
    assert "client_send_share_of_ttft" not in checks(result)
    assert result.load_generator_kept_up is Verdict.PASS
    assert result.client_send_ms is not None and result.client_send_ms.maximum == 40.7
    bare = assess_dispatch(records(starts, send_ms=None), rate(20.0))
    assert bare.client_send_ms is None


def test_held_concurrency_passes_when_slots_stay_busy() -> None:
    result = assess_dispatch(closed_loop(8, 200, latency_ms=100, gap_ms=1), concurrency(8))
    assert result.load_generator_kept_up is Verdict.PASS
    assert result.held_concurrency == pytest.approx(8 * 100 / 101, rel=0.02)
    assert result.peak_concurrency == 8


def test_a_starved_concurrency_fails() -> None:
    result = assess_dispatch(closed_loop(8, 200, latency_ms=10, gap_ms=10), concurrency(8))
    assert result.load_generator_kept_up is Verdict.FAIL
    assert result.held_concurrency == pytest.approx(4.0, rel=0.05)


def test_unbounded_has_no_held_concurrency_check() -> None:
    starts = T0 + np.arange(16, dtype=np.int64) * MS // 10
    result = assess_dispatch(records(starts), UnboundedRequestRate(kind="unbounded_request_rate"))
    assert checks(result)["held_concurrency_ratio"] is Verdict.NOT_APPLICABLE
    assert result.load_generator_kept_up is Verdict.PASS
    assert result.asked_concurrency == 16


def test_too_few_requests_are_unknown() -> None:
    result = assess_dispatch(closed_loop(2, 4, latency_ms=100, gap_ms=1), concurrency(2))
    assert result.load_generator_kept_up is Verdict.UNKNOWN


def test_in_flight_figures() -> None:
    start = np.array([0, 0, 10], dtype=np.int64)
    end = np.array([10, 20, 20], dtype=np.int64)
    assert mean_in_flight(start, end, 0, 20) == pytest.approx(2.0)
    assert peak_in_flight(start, end) == 2  # the end at 10 frees a slot before the start at 10
    assert held_concurrency(start, end, 3) is None
    assert interarrival_cv(np.array([0, 10, 20], dtype=np.int64)) == 0.0
    assert math.isclose(held_concurrency(start, end, 2) or 0.0, 2.0)


def test_sessions_hold_their_slot_through_think_time() -> None:
    """4 sessions of 4 turns at concurrency 2: 100 ms turns 100 ms apart (think time). Per
    turn only half the slots look busy; per session (how AIPerf holds a slot) all are."""
    starts, ends, keys = [], [], []
    for session in range(4):
        begin = T0 + (session // 2) * 700 * MS  # two sessions at a time, back to back
        for turn in range(4):
            starts.append(begin + turn * 200 * MS)
            ends.append(begin + turn * 200 * MS + 100 * MS)
            keys.append(f"inferlab-{session:08d}#t{turn}")
    start_ns, end_ns = np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)
    as_turns = assess_dispatch(records(start_ns, end_ns), concurrency(2))
    assert checks(as_turns)["held_concurrency_ratio"] is Verdict.FAIL
    as_sessions = assess_dispatch(
        records(start_ns, end_ns, session_ids=tuple(keys)), concurrency(2)
    )
    assert checks(as_sessions)["held_concurrency_ratio"] is Verdict.PASS
    assert as_sessions.asked_concurrency == 2 and as_sessions.held_unit == "sessions"
    assert as_turns.held_unit == "requests"
    assert as_sessions.held_concurrency is not None and as_sessions.held_concurrency >= 1.9

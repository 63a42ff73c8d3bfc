"""Latency from the scheduled send: matched to the plan by issue order, counted where sent late."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from inferlab_bench.protocol import ConcurrencyLimited, RequestRateLimited, UnboundedRequestRate
from inferlab_bench.validity.schedule import PlannedSchedule, planned_send_ns, scheduled_latency
from tests.validity.builders import MS, T0, records

RATE = RequestRateLimited(kind="request_rate_limited", request_rate=10.0)


def plan(n: int, gap_s: float = 0.1) -> PlannedSchedule:
    return PlannedSchedule(started_at_ns=T0, intervals_s=(gap_s,) * (n + 1))


def due_times(schedule: PlannedSchedule, n: int) -> np.ndarray:
    return T0 + schedule.offsets_ns()[:n]


def test_the_plan_is_matched_to_credits_in_issue_order() -> None:
    schedule = plan(4)
    assert schedule.offsets_ns().tolist() == [100 * MS, 200 * MS, 300 * MS, 400 * MS, 500 * MS]
    due = due_times(schedule, 4)
    issued = np.array([due[2], due[0] + 3 * MS, due[3], due[1]])  # another order, one late
    planned = planned_send_ns(schedule, issued)
    assert planned is not None
    assert (issued - planned).tolist() == [0, 3 * MS, 0, 0]
    assert planned_send_ns(plan(2), due) is None  # fewer planned sends than records


def test_a_schedule_started_late_is_not_lateness() -> None:
    # AIPerf's loop may begin its schedule after the phase's start stamp: every credit then
    # goes out the same 36 ms after "phase start + plan"; the gaps are kept, nothing is late.
    schedule = plan(100)
    due = due_times(schedule, 100) + 36 * MS
    found = scheduled_latency(records(due + MS // 10, issued_ns=due), RATE, schedule)
    assert found.send_lag_ms is not None and found.send_lag_ms.maximum < 0.2
    assert found.sentence.startswith("Requests went out on schedule")


def test_a_client_that_kept_up_adds_nothing() -> None:
    schedule = plan(100)
    due = due_times(schedule, 100)
    found = scheduled_latency(records(due + MS // 10, issued_ns=due), RATE, schedule)
    assert found.applies and found.basis == "planned"
    assert all(abs(r.difference_ms) < 0.2 for r in found.latencies)
    assert found.sentence.startswith("Requests went out on schedule")


def test_a_stalled_client_shows_the_queueing_it_hid() -> None:
    schedule = plan(100)
    due = due_times(schedule, 100)
    stall = np.where(np.arange(100) >= 50, 600 * MS, 0)  # half the run sent 600 ms late
    sent = due + stall
    base = records(sent, sent + 80 * MS, issued_ns=sent - MS // 2)
    found = scheduled_latency(replace(base, latency_ms=np.full(100, 80.0)), RATE, schedule)
    assert found.send_lag_ms is not None and found.send_lag_ms.maximum >= 600
    assert found.timing_lag_ms is not None and found.timing_lag_ms.maximum >= 599
    p99 = {(r.metric, r.percentile): r for r in found.latencies}[("ttft_ms", 99.0)]
    assert p99.from_schedule_ms >= p99.from_send_ms + 599
    assert "fell behind its schedule" in found.sentence and "--engine kube" in found.sentence


def test_without_a_plan_the_credit_issue_stands_in_and_says_so() -> None:
    starts = T0 + np.arange(60) * 100 * MS
    found = scheduled_latency(records(starts, issued_ns=starts - 30 * MS), RATE, None)
    assert found.basis == "credit_issue" and found.timing_lag_ms is None
    assert found.worker_lag_ms is not None and round(found.worker_lag_ms.p50) == 30
    assert "the plan was not recorded" in found.sentence


def test_closed_and_unbounded_loads_say_why_it_does_not_apply() -> None:
    starts = T0 + np.arange(10) * MS
    closed = scheduled_latency(
        records(starts), ConcurrencyLimited(kind="concurrency_limited", concurrency=2), None
    )
    assert not closed.applies and "closed loop" in closed.sentence
    unbounded = scheduled_latency(
        records(starts), UnboundedRequestRate(kind="unbounded_request_rate"), None
    )
    assert not unbounded.applies and "time zero" in unbounded.sentence

"""Latency from the scheduled send: what each request would have seen from a client that kept up.

A rate-limited load is an open loop: request k is due at a planned time s_k, the k-th arrival
of the Poisson or gamma process. AIPerf's timing loop sleeps until s_k and then issues a
credit (c_k, the records' ``credit_issued_ns``); a worker takes the credit and starts the
request (a_k, ``request_start_ns``). Every latency AIPerf reports runs from a_k. When the
client falls behind, a_k drifts past s_k: its timing loop wakes late, or after a stall longer
than its catch-up window (10 ms in AIPerf 0.13) it re-anchors the rest of the schedule to
"now", or its workers are slow to take credits. The server then sees fewer requests than
planned at that moment, and the queueing the late ones would have met is never measured
(coordinated omission). Measured from the schedule instead:

    TTFT from schedule = TTFT + (a_k - s_k),   E2E from schedule = E2E + (a_k - s_k).

Where s_k comes from. Our AIPerf plugin records every interval the timing loop draws, so
s_k = t0 + the first k + 1 intervals summed, matched to the k-th credit in issue order
(``basis: planned``). An open loop's origin is arbitrary (only its gaps are the load), and
AIPerf's loop may start its schedule a little after the phase's start stamp (it re-anchors
to "now" when already behind at its first target), so t0 is not the phase start: it is the
latest origin under which no credit went out before its due time, min over k of
(c_k - the first k + 1 intervals). The most punctual request counts as on time, so each lag
is the least the plan's gaps allow: a constant delay is no lateness, a stall is.

Without that record (a run on Kubernetes, a case written before it) the credit's issue time
c_k stands in (``basis: credit_issue``); that is the base of
AIPerf's own ``credit_to_start_latency`` and ``effective_latency``, and it misses a timing
loop that fell behind or re-anchored, which only the plan shows.

A closed loop (concurrency-limited) sends each request when a slot frees: there is no
schedule to fall behind, and a client that is slow shows as held concurrency instead. An
unbounded load schedules every request at time zero, so a latency from the schedule would be
the whole run's queue by design. Neither has this section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from inferlab_bench.load import Load
from inferlab_bench.protocol import BenchLoadInput
from inferlab_bench.validity.distribution import Distribution, describe
from inferlab_bench.validity.inputs import FloatArray, Int64Array, PhaseRecords
from inferlab_bench.validity.verdict import Figures

NS_PER_MS = 1e6
PERCENTILES = (50.0, 90.0, 99.0)
ON_SCHEDULE_MS = 1.0
ON_SCHEDULE_SHARE = 0.02
"""A difference within max(1 ms, 2%) at every percentile: the requests went out on schedule."""
BEHIND_MS = 5.0
BEHIND_SHARE = 0.10
"""A difference beyond both 5 ms and 10% at some percentile: the client fell behind."""


@dataclass(frozen=True)
class PlannedSchedule:
    """The timing loop's plan for one phase, as our AIPerf plugin recorded it."""

    started_at_ns: int
    """Wall clock of the phase start (AIPerf's lifecycle, the base of credit issue times):
    kept as evidence; the plan is anchored on the credits themselves."""
    intervals_s: tuple[float, ...]
    """Every interval the timing loop drew, in order (one more than the credits it issued)."""

    def offsets_ns(self) -> Int64Array:
        """Each credit's due time after the schedule's origin, in issue order."""
        offsets = np.cumsum(np.asarray(self.intervals_s, dtype=np.float64)) * 1e9
        return np.rint(offsets).astype(np.int64)


def planned_send_ns(schedule: PlannedSchedule, credit_issued_ns: Int64Array) -> Int64Array | None:
    """Per record, its planned send time (None when the plan holds fewer sends than records),
    anchored at the latest origin under which no credit went out early."""
    n = len(credit_issued_ns)
    offsets = schedule.offsets_ns()
    if n == 0 or len(offsets) < n:
        return None
    order = np.argsort(credit_issued_ns, kind="stable")
    origin = int(np.min(credit_issued_ns[order] - offsets[:n]))
    planned = np.empty(n, dtype=np.int64)
    planned[order] = origin + offsets[:n]
    return planned


class LatencyFromSchedule(Figures):
    """One percentile of one latency, from the actual send and from the scheduled send."""

    metric: str
    percentile: float
    from_send_ms: float
    from_schedule_ms: float
    difference_ms: float


class ScheduledLatency(Figures):
    """validity.json's ``scheduled_latency``: latency as a client that kept up would see it."""

    applies: bool
    basis: Literal["planned", "credit_issue"] | None
    """What the scheduled send is: the recorded plan, or AIPerf's credit issue time."""
    requests: int
    send_lag_ms: Distribution | None
    """Actual start minus scheduled send: what every reported latency leaves out."""
    timing_lag_ms: Distribution | None
    """Credit issue minus planned send: the timing loop's own lateness (planned basis only)."""
    worker_lag_ms: Distribution | None
    """Request start minus credit issue (AIPerf's ``credit_to_start_latency``)."""
    latencies: tuple[LatencyFromSchedule, ...]
    sentence: str


def scheduled_latency(
    records: PhaseRecords, load: BenchLoadInput, schedule: PlannedSchedule | None
) -> ScheduledLatency:
    """TTFT and E2E from the scheduled send beside those from the actual send."""
    n = len(records)
    shape = Load.of(load)
    if not shape.rate_limited:
        return _without_figures(n, _WHY_NOT[shape.kind.value], applies=False)
    issued = records.credit_issued_ns
    planned = None
    if schedule is not None and issued is not None:
        planned = planned_send_ns(schedule, issued)
    due = planned if planned is not None else issued
    if due is None:
        why = (
            "Not measured: AIPerf recorded no credit issue times and no plan was recorded, "
            "so when each request was due is unknown."
        )
        return _without_figures(n, why, applies=True)
    lag = (records.start_ns - due).astype(np.float64) / NS_PER_MS
    ok = records.succeeded
    latencies = _percentiles(records, lag, ok)
    basis: Literal["planned", "credit_issue"] = "planned" if planned is not None else "credit_issue"
    send_lag = describe(lag)
    return ScheduledLatency(
        applies=True,
        basis=basis,
        requests=n,
        send_lag_ms=send_lag,
        timing_lag_ms=None
        if planned is None or issued is None
        else describe((issued - planned).astype(np.float64) / NS_PER_MS),
        worker_lag_ms=None
        if issued is None
        else describe((records.start_ns - issued).astype(np.float64) / NS_PER_MS),
        latencies=latencies,
        sentence=_sentence(basis, send_lag, latencies),
    )


_WHY_NOT = {
    "concurrency_limited": "Not applicable: a concurrency-limited load is a closed loop, each "
    "request sent when a slot frees, so there is no schedule to fall behind (a client that "
    "cannot keep up shows as held concurrency instead).",
    "unbounded_request_rate": "Not applicable: an unbounded load schedules every request at "
    "time zero, so latency from the schedule would be the whole run's queue by design.",
}


def _without_figures(n: int, why: str, *, applies: bool) -> ScheduledLatency:
    return ScheduledLatency(
        applies=applies,
        basis=None,
        requests=n,
        send_lag_ms=None,
        timing_lag_ms=None,
        worker_lag_ms=None,
        latencies=(),
        sentence=why,
    )


def _percentiles(
    records: PhaseRecords, lag_ms: FloatArray, ok: np.ndarray
) -> tuple[LatencyFromSchedule, ...]:
    rows = []
    columns = (("ttft_ms", records.ttft_ms), ("request_latency_ms", records.latency_ms))
    for metric, values in columns:
        if values is None:
            continue
        keep = ok & np.isfinite(values)
        if not keep.any():
            continue
        sent = np.percentile(values[keep], PERCENTILES)
        scheduled = np.percentile(values[keep] + lag_ms[keep], PERCENTILES)
        rows += [
            LatencyFromSchedule(
                metric=metric,
                percentile=p,
                from_send_ms=float(a),
                from_schedule_ms=float(b),
                difference_ms=float(b - a),
            )
            for p, a, b in zip(PERCENTILES, sent, scheduled, strict=True)
        ]
    return tuple(rows)


def _sentence(
    basis: str, lag: Distribution | None, latencies: tuple[LatencyFromSchedule, ...]
) -> str:
    caveat = (
        ""
        if basis == "planned"
        else " (measured from AIPerf's credit issue: the plan was not recorded, so a timing "
        "loop that fell behind is not seen)"
    )
    if lag is None or not latencies:
        return "Not measured: no request succeeded with a send time." + caveat
    if all(
        r.difference_ms <= max(ON_SCHEDULE_MS, ON_SCHEDULE_SHARE * r.from_send_ms)
        for r in latencies
    ):
        return (
            f"Requests went out on schedule (at most {lag.maximum:.1f} ms late): latency from "
            f"the scheduled send equals latency from the actual send{caveat}."
        )
    worst = max(latencies, key=lambda r: r.difference_ms / max(r.from_send_ms, 1e-9))
    told = (
        f"Requests went out {lag.p50:.1f} ms (median) and up to {lag.maximum:.0f} ms after "
        f"they were due; measured from then, {_name(worst.metric)} p{worst.percentile:g} is "
        f"{worst.from_schedule_ms:.1f} ms instead of {worst.from_send_ms:.1f} ms{caveat}."
    )
    behind = any(r.difference_ms > max(BEHIND_MS, BEHIND_SHARE * r.from_send_ms) for r in latencies)
    if not behind:
        return told + " The reported latencies leave that much client time out."
    return (
        told + " The client fell behind its schedule, so the reported latencies leave that "
        "queueing out (coordinated omission); lower the rate or run the client on its own "
        "machine (--engine kube)."
    )


def _name(metric: str) -> str:
    return {"ttft_ms": "TTFT", "request_latency_ms": "E2E"}.get(metric, metric)

"""Dispatch fidelity: did the load generator send what the load shape asked, when it asked?

Four checks over one phase's records, combined into ``load_generator_kept_up``:

- dispatch delay: request start minus AIPerf's credit issue time (the moment its timing
  strategy decided to send), per request; its p95 must stay under a bound;
- achieved rate (rate shapes): (n - 1) / (last start - first start) against the target.
  The estimate of a renewal process from n - 1 gaps has relative standard error
  CV / sqrt(n - 1), so the band is max(floor, z * that);
- inter-arrival dispersion (rate shapes): the coefficient of variation of the gaps between
  starts against the shape's (poisson 1, gamma with smoothness b 1/sqrt(b)). For gamma
  gaps of shape k the sample CV has asymptotic standard error sqrt((1 + k) / (2 k^2 m))
  over m gaps; the band is max(floor, z * that);
- held concurrency (concurrency shapes): time-weighted mean number of requests in flight
  over the steady window, from the moment the c-th request started to the last start
  (before it the ramp, after it the drain), against the asked c.

The client's own cost (its CPU per request, the run queue, its send delay) is judged in
``client_cost`` by what the client spends, not here: a share of a TTFT that the client's
CPU use itself inflates said least where the client distorted most. The client's traced
send time is still reported here as a figure (``client_send_ms``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from inferlab_bench.load import Load, LoadKind
from inferlab_bench.protocol import BenchLoadInput
from inferlab_bench.validity.distribution import Distribution, describe
from inferlab_bench.validity.inputs import FloatArray, Int64Array, PhaseRecords, session_spans
from inferlab_bench.validity.verdict import (
    Check,
    Figures,
    Verdict,
    at_least,
    at_most,
    combine_checks,
    not_applicable,
    unknown,
)

NS_PER_S = 1e9
NS_PER_MS = 1e6


@dataclass(frozen=True)
class DispatchTolerances:
    """How far dispatch may stray before the load generator is said not to have kept up."""

    max_dispatch_delay_p95_ms: float = 50.0
    rate_sigmas: float = 3.0
    rate_floor: float = 0.05
    cv_sigmas: float = 3.0
    cv_floor: float = 0.1
    min_held_concurrency_ratio: float = 0.9
    min_requests: int = 8


class DispatchFidelity(Figures):
    """The verdict ``load_generator_kept_up`` and the figures behind it."""

    load_generator_kept_up: Verdict
    load_shape: str
    requests: int
    target_rate: float | None
    achieved_rate: float | None
    expected_interarrival_cv: float | None
    interarrival_cv: float | None
    asked_concurrency: int | None
    held_concurrency: float | None
    peak_concurrency: int
    mean_concurrency_over_run: float | None
    dispatch_delay_ms: Distribution | None
    checks: tuple[Check, ...]
    client_send_ms: Distribution | None = None
    """After request start, the client's own time until the request was sent (AIPerf's
    HTTP trace): part of every latency AIPerf reports, not the server's."""
    held_unit: str = "requests"
    """What held the concurrency: ``sessions`` for a conversation case (from a session's
    first turn to its last, think time included)."""


def dispatch_delays_ms(records: PhaseRecords) -> FloatArray | None:
    """Per request, milliseconds from credit issue to request start (None if not recorded)."""
    if records.credit_issued_ns is None:
        return None
    return (records.start_ns - records.credit_issued_ns).astype(np.float64) / NS_PER_MS


def achieved_rate(start_ns: Int64Array) -> float | None:
    """Requests per second over the sending window: (n - 1) gaps / (last - first start)."""
    if len(start_ns) < 2:
        return None
    span = float(start_ns.max() - start_ns.min()) / NS_PER_S
    return (len(start_ns) - 1) / span if span > 0 else None


def interarrival_cv(start_ns: Int64Array) -> float | None:
    """Coefficient of variation (sample std / mean) of the gaps between sorted starts."""
    gaps = np.diff(np.sort(start_ns)).astype(np.float64)
    if gaps.size < 2 or gaps.mean() <= 0:
        return None
    return float(gaps.std(ddof=1) / gaps.mean())


def cv_standard_error(shape: float, gaps: int) -> float:
    """Asymptotic standard error of the sample CV of ``gaps`` gamma(shape) values."""
    return math.sqrt((1.0 + shape) / (2.0 * shape * shape * gaps))


def mean_in_flight(start_ns: Int64Array, end_ns: Int64Array, lo: int, hi: int) -> float | None:
    """Time-weighted mean number of requests in flight over [lo, hi] (ns)."""
    if hi <= lo:
        return None
    overlap = np.clip(np.minimum(end_ns, hi) - np.maximum(start_ns, lo), 0, None)
    return float(overlap.sum() / (hi - lo))


def peak_in_flight(start_ns: Int64Array, end_ns: Int64Array) -> int:
    """Most requests in flight at any instant (an end at t is counted before a start at t)."""
    times = np.concatenate([start_ns, end_ns])
    steps = np.concatenate([np.ones(len(start_ns)), -np.ones(len(end_ns))])
    order = np.lexsort((steps, times))
    return int(np.cumsum(steps[order]).max(initial=0))


def held_concurrency(start_ns: Int64Array, end_ns: Int64Array, asked: int) -> float | None:
    """Mean in flight from the asked-th start to the last start (None: no steady window)."""
    starts = np.sort(start_ns)
    if len(starts) <= asked:
        return None
    return mean_in_flight(start_ns, end_ns, int(starts[asked - 1]), int(starts[-1]))


def delay_check(
    records: PhaseRecords, tol: DispatchTolerances
) -> tuple[Check, Distribution | None]:
    """p95 of credit-issue-to-start delay against its bound."""
    delays = dispatch_delays_ms(records)
    if delays is None:
        return unknown("dispatch_delay_p95_ms", "AIPerf recorded no credit_issued_ns"), None
    figures = describe(delays)
    observed = None if figures is None else figures.p95
    check = at_most(
        "dispatch_delay_p95_ms",
        observed,
        tol.max_dispatch_delay_p95_ms,
        "ms from credit issue to request start",
    )
    return check, figures


def rate_check(
    rate: float | None, target: float, cv: float, n: int, tol: DispatchTolerances
) -> Check:
    """Relative error of the achieved rate within max(floor, z * CV / sqrt(n - 1))."""
    if rate is None:
        return unknown("achieved_rate_relative_error", "fewer than two distinct start times")
    band = max(tol.rate_floor, tol.rate_sigmas * cv / math.sqrt(max(n - 1, 1)))
    return at_most(
        "achieved_rate_relative_error",
        abs(rate / target - 1.0),
        band,
        f"achieved {rate:.3f}/s vs target {target:.3f}/s",
    )


def cv_check(observed: float | None, expected: float, n: int, tol: DispatchTolerances) -> Check:
    """Absolute error of the inter-arrival CV within max(floor, z * standard error)."""
    if observed is None:
        return unknown("interarrival_cv_error", "too few gaps between starts")
    shape = 1.0 / (expected * expected)
    band = max(tol.cv_floor, tol.cv_sigmas * cv_standard_error(shape, max(n - 1, 1)))
    return at_most(
        "interarrival_cv_error",
        abs(observed - expected),
        band,
        f"CV {observed:.3f} vs expected {expected:.3f}",
    )


def concurrency_check(held: float | None, asked: int, tol: DispatchTolerances) -> Check:
    """Held / asked concurrency at least the bound (unknown without a steady window)."""
    if held is None:
        return unknown("held_concurrency_ratio", "no steady window: requests <= concurrency")
    return at_least(
        "held_concurrency_ratio",
        held / asked,
        tol.min_held_concurrency_ratio,
        f"held {held:.2f} of {asked} in flight",
    )


def assess_dispatch(
    records: PhaseRecords, load: BenchLoadInput, tol: DispatchTolerances = DispatchTolerances()
) -> DispatchFidelity:
    """All dispatch checks of one phase for its load shape, and the combined verdict."""
    n = len(records)
    delay, delay_figures = delay_check(records, tol)
    checks = [delay]
    rate = achieved_rate(records.start_ns)
    cv = interarrival_cv(records.start_ns)
    target_rate = expected = None
    asked = held = None
    unit = "requests"
    shape = Load.of(load)
    if shape.rate_limited:
        target_rate, expected = shape.rate, shape.expected_interarrival_cv
        assert target_rate is not None and expected is not None
        checks += [rate_check(rate, target_rate, expected, n, tol), cv_check(cv, expected, n, tol)]
    else:
        # A conversation case's slots are held by sessions (think time included), not turns.
        spans = session_spans(records.session_ids, records.start_ns, records.end_ns)
        starts, ends = (records.start_ns, records.end_ns) if spans is None else spans
        unit = "requests" if spans is None else "sessions"
        cap = shape.in_flight(len(starts))  # a concurrency above the count cannot be held
        asked = cap if cap is not None else len(starts)
        held = held_concurrency(starts, ends, asked)
        checks.append(_concurrency_or_na(shape, held, asked, tol))
    if n < tol.min_requests:
        checks.append(unknown("enough_requests", f"{n} < {tol.min_requests} records"))
    return DispatchFidelity(
        load_generator_kept_up=combine_checks(checks),
        load_shape=load.kind,
        requests=n,
        target_rate=target_rate,
        achieved_rate=rate,
        expected_interarrival_cv=expected,
        interarrival_cv=cv,
        asked_concurrency=asked,
        held_concurrency=held,
        peak_concurrency=peak_in_flight(records.start_ns, records.end_ns),
        mean_concurrency_over_run=_run_mean(records),
        dispatch_delay_ms=delay_figures,
        checks=tuple(checks),
        client_send_ms=None if records.client_send_ms is None else describe(records.client_send_ms),
        held_unit=unit,
    )


def _concurrency_or_na(
    load: Load, held: float | None, asked: int, tol: DispatchTolerances
) -> Check:
    if load.kind is LoadKind.UNBOUNDED:
        return not_applicable("held_concurrency_ratio", "unbounded: every request at once")
    return concurrency_check(held, asked, tol)


def _run_mean(records: PhaseRecords) -> float | None:
    if len(records) == 0:
        return None
    lo, hi = int(records.start_ns.min()), int(records.end_ns.max())
    return mean_in_flight(records.start_ns, records.end_ns, lo, hi)

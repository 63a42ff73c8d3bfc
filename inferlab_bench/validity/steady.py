"""Steady state: the window of a run in which the system had settled, found by MSER-5.

A run starts empty (the first requests meet an idle server, or, at a concurrency, all arrive
at once) and ends draining (after the last send, nothing new arrives). Neither end is the
load the run asked for. We find the start of the settled part with MSER-5 (White, 1997,
"An effective truncation heuristic for bias reduction in simulation output"), the standard
warm-up deletion rule of simulation output analysis:

- a series in send order is cut into batches of 5 and averaged;
- for each truncation d (in batches), MSER(d) = sum over kept batches of (mean_i - mean)^2,
  divided by the square of the number kept: the squared standard error of the kept mean;
- the truncation is the d that minimizes it. It is trusted only when it falls in the first
  half of the series; a minimum further on means the series was still moving when the run
  ended (it never settled, or the run is too short to tell).

Three series are cut this way, each request in send order: the number of requests in flight
when it was sent (the system's state: it climbs through a first wave and, in an overloaded
open loop, never stops climbing), its TTFT and its end-to-end latency. The window starts at
the latest of the three truncations and ends at the last send; its figures are over the
requests that started and finished inside it. Fewer than ``MIN_BATCHES`` batches are not
judged: the rule has nothing to stand on.
"""

from __future__ import annotations

import numpy as np

from inferlab_bench.validity.inputs import FloatArray, Int64Array, PhaseRecords
from inferlab_bench.validity.verdict import Figures, Verdict

BATCH = 5
MIN_BATCHES = 10
NS_PER_S = 1e9
PERCENTILES = (50.0, 90.0, 99.0)


def mser_truncation(series: FloatArray, batch: int = BATCH) -> tuple[int, int] | None:
    """(d, batches): MSER-``batch``'s truncation in batches, and how many batches there were.

    Only whole batches from the start count (a remainder at the end is dropped). None when the
    series has fewer than two batches.
    """
    batches = len(series) // batch
    if batches < 2:
        return None
    means = np.asarray(series[: batches * batch], dtype=np.float64).reshape(batches, batch)
    means = means.mean(axis=1)
    values = [float(((kept - kept.mean()) ** 2).sum()) / len(kept) ** 2 for kept in _tails(means)]
    return int(np.argmin(values)), batches  # the first minimum: the least truncation


def _tails(means: FloatArray) -> list[FloatArray]:
    """means[d:] for every truncation d that keeps at least two batches."""
    return [means[d:] for d in range(len(means) - 1)]


def in_flight_at_send(start_ns: Int64Array, end_ns: Int64Array) -> FloatArray:
    """Per request, how many others were in flight at its start (ends at t before starts at t)."""
    ends = np.sort(end_ns)
    starts = np.sort(start_ns)
    started_before = np.searchsorted(starts, start_ns, side="left")
    ended_by = np.searchsorted(ends, start_ns, side="right")
    result: FloatArray = (started_before - ended_by).astype(np.float64)
    return result


class SeriesCut(Figures):
    """MSER-5 on one series: where it cut, and whether the cut can be trusted."""

    series: str
    truncated_requests: int
    batches: int
    settled: bool


class WindowMetric(Figures):
    """One percentile of one latency, over the whole run and over the steady window."""

    metric: str
    percentile: float
    whole_run_ms: float
    steady_ms: float


class SteadyState(Figures):
    """validity.json's ``steady_state``: whether and where the run settled, and its figures."""

    method: str = "mser-5"
    reached: Verdict
    """pass: a window was found; fail: a series never settled; unknown: too few requests."""
    requests: int
    cuts: tuple[SeriesCut, ...] = ()
    window_start_s: float | None = None
    """Seconds from the first send to the window's start."""
    window_end_s: float | None = None
    """Seconds from the first send to the last send (the window's end)."""
    requests_in_window: int = 0
    in_flight_whole_run: float | None = None
    in_flight_steady: float | None = None
    completions_per_s_whole_run: float | None = None
    completions_per_s_steady: float | None = None
    latencies: tuple[WindowMetric, ...] = ()
    sentence: str


def steady_state(records: PhaseRecords) -> SteadyState:
    """Find the steady window of one phase and report figures over it beside the whole run."""
    n = len(records)
    if n < BATCH * MIN_BATCHES:
        return SteadyState(
            reached=Verdict.UNKNOWN,
            requests=n,
            sentence=f"Not judged: {n} requests are too few to tell a settled run from a "
            f"ramp (MSER-5 needs at least {BATCH * MIN_BATCHES}).",
        )
    order = np.argsort(records.start_ns, kind="stable")
    start, end = records.start_ns[order], records.end_ns[order]
    series = {"in_flight_at_send": in_flight_at_send(start, end)}
    for name, column in (("ttft_ms", records.ttft_ms), ("request_latency_ms", records.latency_ms)):
        if column is not None:
            series[name] = _filled(column[order])
    cuts = tuple(_cut(name, values) for name, values in series.items())
    first = int(start[0])
    if not all(c.settled for c in cuts):
        moving = ", ".join(c.series for c in cuts if not c.settled)
        return SteadyState(
            reached=Verdict.FAIL,
            requests=n,
            cuts=cuts,
            window_end_s=(int(start[-1]) - first) / NS_PER_S,
            sentence=f"Never reached a steady state: {moving} was still moving when the run "
            "ended (an overloaded server's queue keeps growing, or the run is too short for "
            "this load); its percentiles describe a ramp, not a level.",
        )
    skip = max(c.truncated_requests for c in cuts)
    lo, hi = int(start[skip]), int(start[-1])
    inside = (records.start_ns >= lo) & (records.end_ns <= hi)
    return SteadyState(
        reached=Verdict.PASS,
        requests=n,
        cuts=cuts,
        window_start_s=(lo - first) / NS_PER_S,
        window_end_s=(hi - first) / NS_PER_S,
        requests_in_window=int(inside.sum()),
        in_flight_whole_run=_mean_in_flight(records, first, int(records.end_ns.max())),
        in_flight_steady=_mean_in_flight(records, lo, hi),
        completions_per_s_whole_run=_completion_rate(records.end_ns, first, None),
        completions_per_s_steady=_completion_rate(records.end_ns, lo, hi),
        latencies=_window_latencies(records, inside),
        sentence=_settled_sentence(skip, n, int(inside.sum()), (hi - lo) / NS_PER_S),
    )


def _cut(name: str, values: FloatArray) -> SeriesCut:
    found = mser_truncation(values)
    assert found is not None  # n >= BATCH * MIN_BATCHES
    d, batches = found
    return SeriesCut(
        series=name, truncated_requests=d * BATCH, batches=batches, settled=d <= batches // 2
    )


def _filled(values: FloatArray) -> FloatArray:
    """A failed request has no latency; it takes the median so that it neither cuts nor hides."""
    finite = np.isfinite(values)
    if finite.all() or not finite.any():
        return np.nan_to_num(values)
    out: FloatArray = np.where(finite, values, np.median(values[finite]))
    return out


def _mean_in_flight(records: PhaseRecords, lo: int, hi: int) -> float | None:
    if hi <= lo:
        return None
    overlap = np.clip(np.minimum(records.end_ns, hi) - np.maximum(records.start_ns, lo), 0, None)
    return float(overlap.sum() / (hi - lo))


def _completion_rate(end_ns: Int64Array, lo: int, hi: int | None) -> float | None:
    top = int(end_ns.max()) if hi is None else hi
    if top <= lo:
        return None
    done = (end_ns > lo) & (end_ns <= top)
    return float(done.sum() / ((top - lo) / NS_PER_S))


def _window_latencies(records: PhaseRecords, inside: np.ndarray) -> tuple[WindowMetric, ...]:
    rows = []
    columns = (
        ("ttft_ms", records.ttft_ms),
        ("tpot_ms", records.itl_ms),
        ("request_latency_ms", records.latency_ms),
    )
    for metric, values in columns:
        if values is None:
            continue
        ok = records.succeeded & np.isfinite(values)
        if not (ok & inside).any():
            continue
        whole = np.percentile(values[ok], PERCENTILES)
        steady = np.percentile(values[ok & inside], PERCENTILES)
        rows += [
            WindowMetric(metric=metric, percentile=p, whole_run_ms=float(a), steady_ms=float(b))
            for p, a, b in zip(PERCENTILES, whole, steady, strict=True)
        ]
    return tuple(rows)


def _settled_sentence(skip: int, n: int, inside: int, seconds: float) -> str:
    ramp = "from the first request" if skip == 0 else f"after the first {skip} requests"
    return (
        f"Reached a steady state {ramp}; the window up to the last send holds {inside} of "
        f"{n} requests over {seconds:.1f} s, and its figures stand beside the whole run's."
    )

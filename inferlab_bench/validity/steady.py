"""Steady state: the window of a run in which the system had settled, and whether it did.

A run starts empty (the first requests meet an idle server or, at a concurrency, all arrive
at once) and ends draining (after the last send nothing new arrives). Neither end is the load
the run asked for. Two steps, over three per-request series in send order: how many other
requests were in flight, on average, over its life (the system's state), its TTFT and its
end-to-end latency; requests still running at the last send (the drain) are left out.

The state is averaged over each request's life, not counted at its send: a server that
finishes a batch in lockstep (every request of a wave ending together, as equal output
lengths do) has a closed loop send its next wave one by one, and a count at each send reads
0, 1, ..., c-1 in every wave while c requests run the whole time. When the waves later drift
apart that count rises to c-1, a trend in a run that never left its level (a CI run read
exactly that, 0.91 of its median, p = 0.0002); the mean over each life reads c-1 in both.

1. Where the warm-up ends: MSER-5 (White, 1997, "An effective truncation heuristic for bias
   reduction in simulation output"), the standard warm-up deletion rule of simulation output
   analysis. The series is cut into batches of 5 and averaged; for each truncation d (in
   batches, searched over the first half), MSER(d) is the squared standard error of the mean
   of the batches kept; the truncation is the d that minimizes it. The window starts at the
   latest truncation of the three series and ends at the last send.
2. Whether what remains is level: a series still moving has a trend. Over the kept batch
   means, Kendall's tau against time must not be significant (p < 0.001) together with a
   Theil-Sen slope that moves the series by more than half its median across the window.
   An overloaded open loop fails this (its queue, and every latency, keeps growing); a
   noisy but level run passes it.

Fewer than ``MIN_BATCHES`` batches are not judged: neither step has anything to stand on.
"""

from __future__ import annotations

import numpy as np

from inferlab_bench.validity.inputs import FloatArray, Int64Array, PhaseRecords
from inferlab_bench.validity.verdict import Figures, Verdict

BATCH = 5
MIN_BATCHES = 10
TREND_P = 0.001
TREND_SHARE = 0.5
"""A kept series with a significant trend (Kendall p < 0.001) that moves it by more than half
its median across the window has not settled. A queue that keeps growing passes both by far
(p below 1e-9, a change of many medians); a shared machine's bursts can pass the looser
0.01 and 25% in a level run, which is why the bounds sit here."""
NS_PER_S = 1e9
PERCENTILES = (50.0, 90.0, 99.0)


def batch_means(series: FloatArray, batch: int = BATCH) -> FloatArray:
    """Means of consecutive batches (a remainder at the end is dropped)."""
    batches = len(series) // batch
    means: FloatArray = (
        np.asarray(series[: batches * batch], dtype=np.float64).reshape(batches, batch).mean(1)
    )
    return means


def mser_truncation(means: FloatArray) -> int:
    """MSER's truncation, in batches, searched over the first half: the least d minimizing
    the squared standard error of the mean of ``means[d:]``."""
    values = [
        float(((kept - kept.mean()) ** 2).sum()) / len(kept) ** 2
        for kept in (means[d:] for d in range(len(means) // 2 + 1))
    ]
    return int(np.argmin(values))  # the first minimum: the least truncation


def trend(means: FloatArray) -> tuple[float, float]:
    """(Kendall's p-value against time, Theil-Sen change across the series / its median)."""
    from scipy import stats  # imported here: scipy is slow to import and only this needs it

    if np.ptp(means) == 0:
        return 1.0, 0.0
    index = np.arange(len(means), dtype=np.float64)
    p_value = float(stats.kendalltau(index, means).pvalue)
    slope = float(stats.theilslopes(means, index).slope)
    median = float(np.median(np.abs(means)))
    change = abs(slope) * (len(means) - 1) / median if median > 0 else float("inf")
    return p_value, change


def in_flight_during(start_ns: Int64Array, end_ns: Int64Array) -> FloatArray:
    """Per request, how many others were in flight on average over its life (start to end),
    time-weighted; an end at t counts as before a start at t. A request of no duration takes
    the count just after its instant (its own end counted before its start, so not itself)."""
    times = np.concatenate([end_ns, start_ns]).astype(np.int64)
    steps = np.concatenate([-np.ones(len(end_ns)), np.ones(len(start_ns))])
    order = np.lexsort((steps, times))  # at one instant, ends first
    times, running = times[order], np.cumsum(steps[order])
    area = np.concatenate([[0.0], np.cumsum(running[:-1] * np.diff(times).astype(np.float64))])
    lo = np.searchsorted(times, start_ns, side="left")
    hi = np.searchsorted(times, end_ns, side="left")
    life = (np.asarray(end_ns) - np.asarray(start_ns)).astype(np.float64)
    after_start = running[np.searchsorted(times, start_ns, side="right") - 1]
    with_itself = np.divide(area[hi] - area[lo], life, out=after_start + 1.0, where=life > 0)
    result: FloatArray = with_itself - 1.0
    return result


class SeriesCut(Figures):
    """One series: where MSER-5 cut its warm-up, and whether the rest is level."""

    series: str
    truncated_requests: int
    batches: int
    trend_p_value: float
    trend_change: float
    """The Theil-Sen change across the kept batches, as a share of their median."""
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
    order = np.argsort(records.start_ns, kind="stable")
    start, end = records.start_ns[order], records.end_ns[order]
    last_send = int(start[-1]) if n else 0
    loaded = end <= last_send  # the drain (still running at the last send) is left out
    if int(loaded.sum()) < BATCH * MIN_BATCHES:
        return SteadyState(
            reached=Verdict.UNKNOWN,
            requests=n,
            sentence=f"Not judged: of {n} requests, {int(loaded.sum())} finished before the "
            f"last send, too few to tell a settled run from a ramp (MSER-5 needs at least "
            f"{BATCH * MIN_BATCHES}).",
        )
    series = {"in_flight_during": in_flight_during(start, end)[loaded]}
    for name, column in (("ttft_ms", records.ttft_ms), ("request_latency_ms", records.latency_ms)):
        if column is not None:
            series[name] = _filled(column[order][loaded])
    cuts = tuple(cut_series(name, values) for name, values in series.items())
    first = int(start[0])
    if not all(c.settled for c in cuts):
        moving = " and ".join(c.series for c in cuts if not c.settled)
        return SteadyState(
            reached=Verdict.FAIL,
            requests=n,
            cuts=cuts,
            window_end_s=(last_send - first) / NS_PER_S,
            sentence=f"Never reached a steady state: {moving} kept moving to the end of the "
            "run (an overloaded server's queue keeps growing, or the run is too short for this "
            "load), so its percentiles describe a trend, not a level.",
        )
    skip = max(c.truncated_requests for c in cuts)
    lo = int(start[np.flatnonzero(loaded)[skip]])
    inside = (records.start_ns >= lo) & (records.end_ns <= last_send)
    return SteadyState(
        reached=Verdict.PASS,
        requests=n,
        cuts=cuts,
        window_start_s=(lo - first) / NS_PER_S,
        window_end_s=(last_send - first) / NS_PER_S,
        requests_in_window=int(inside.sum()),
        in_flight_whole_run=_mean_in_flight(records, first, int(records.end_ns.max())),
        in_flight_steady=_mean_in_flight(records, lo, last_send),
        completions_per_s_whole_run=_completion_rate(records.end_ns, first, None),
        completions_per_s_steady=_completion_rate(records.end_ns, lo, last_send),
        latencies=_window_latencies(records, inside),
        sentence=_settled_sentence(skip, n, int(inside.sum()), (last_send - lo) / NS_PER_S),
    )


def cut_series(name: str, values: FloatArray) -> SeriesCut:
    """Step 1 and 2 for one series: where MSER-5 cuts it, and whether the rest is level."""
    means = batch_means(values)
    d = mser_truncation(means)
    p_value, change = trend(means[d:])
    return SeriesCut(
        series=name,
        truncated_requests=d * BATCH,
        batches=len(means),
        trend_p_value=p_value,
        trend_change=change,
        settled=not (p_value < TREND_P and change > TREND_SHARE),
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

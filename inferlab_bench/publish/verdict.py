"""Pure verdicts of a reproduction: per metric, same within noise / faster / slower, or not
comparable, with the difference, its confidence interval and the test that gave it.

Percentiles (TTFT, TPOT/ITL, E2E at p50/p90/p99) are judged by a bootstrap over per-request
records: trials are resampled, then requests within each trial, so both the request-to-request
and the trial-to-trial spread widen the interval. Throughput and goodput are one number per
trial, so they are judged over trials (Welch's t interval; a t prediction interval when one
side has a single trial). A difference is called ``faster``/``slower`` only when its interval
excludes zero and it is at least ``tolerance`` of the published value. The intervals of a
case's metrics hold their confidence jointly (Bonferroni: each at 1 - 0.05 / 11).

A side with one trial shows no run-to-run spread, yet the same server run twice differs by
more than its request-to-request spread allows (on a busy host most of all). Such a side's
bootstrap is widened by ``RUN_FLOORS``, the run-to-run spread measured on same-server runs
(``benchmarks/calibrate.py``, docs/calibration.md), or by the other side's measured
trial-to-trial spread when that is larger; a side of 2+ trials that agree more closely
than the floor is topped up to it. The test's text names the floor used.

Memory: resampling n requests 2000 times holds 2000 x n values (a 100k-request baseline took
4.8 GB and 37 s). Above ``DIRECT_CELLS`` the percentile of a resample is drawn directly: the
k-th smallest of n values drawn with replacement is at or below the j-th smallest value with
probability P(Binomial(n, j / n) >= k), so one sort and one table of n probabilities give
each resample's k-th order statistic by inversion, in O(n) memory. It is exact for the
nearest-rank percentile; numpy's interpolated one differs by less than one gap between
neighbouring order statistics (the test's text says which was used).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import numpy as np
import numpy.typing as npt

from inferlab_bench.validity.trials import t_quantile

Word = Literal["same within noise", "faster", "slower", "not comparable"]
Samples = Mapping[str, npt.NDArray[np.float64]]

LATENCIES = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT/ITL"), ("request_latency_ms", "E2E"))
QUANTILES = (50, 90, 99)
PERCENTILE_METRICS = tuple(
    (f"p{q}_{column}", column, q) for column, _ in LATENCIES for q in QUANTILES
)
TRIAL_METRICS = ("output_throughput", "goodput")
HIGHER_IS_FASTER = frozenset(TRIAL_METRICS)
RUN_FLOORS: Mapping[str, float] = MappingProxyType(
    {
        "p50_ttft_ms": 0.10,
        "p90_ttft_ms": 0.26,
        "p99_ttft_ms": 0.30,
        "p50_tpot_ms": 0.06,
        "p90_tpot_ms": 0.15,
        "p99_tpot_ms": 0.28,
        "p50_request_latency_ms": 0.07,
        "p90_request_latency_ms": 0.16,
        "p99_request_latency_ms": 0.24,
        "output_throughput": 0.10,
        "goodput": 0.10,
    }
)
"""How far one trial's figure moves from run to run, the server unchanged, beyond its
requests' own spread: a relative standard deviation per metric, measured 2026-12-07
05:41-06:36 UTC with ``benchmarks/calibrate.py`` (the simulator at TTFT ~60 ms, ITL 15 ms;
c=4, 48 requests a run) on a 2-core host at load 8-30 (other sessions' test suites): 9
same-server runs without a hog moved TPOT p50 0.8%, p90 4.7%, p99 12%; 3 runs with a CPU
hog on every core moved TTFT 9/26/30%, TPOT 6/14/27%, E2E 6/16/24% (p50/p90/p99),
throughput 10%. These are the hog's, rounded up: the stated rate must hold on a loaded
host. A quieter host or a steadier server moves less; this is the floor for one trial, not a
measurement of the server at hand."""
FLOOR_SOURCE = "docs/calibration.md"
DIRECT_CELLS = 4_000_000
"""Resamples x requests above which a trial's percentile bootstrap is drawn by order statistic."""


@dataclass(frozen=True)
class Side:
    """One side of a comparison: each trial's metrics and (when known) its per-request values."""

    metrics: tuple[Mapping[str, float], ...]
    samples: tuple[Samples, ...] = ()

    @property
    def trials(self) -> int:
        return len(self.metrics)

    def columns(self, column: str) -> list[npt.NDArray[np.float64]] | None:
        """Each trial's finite values of ``column``; None unless every trial has some."""
        if len(self.samples) != self.trials or not self.samples:
            return None
        found = [np.asarray(s.get(column, []), dtype=np.float64) for s in self.samples]
        found = [v[np.isfinite(v)] for v in found]
        return found if all(v.size for v in found) else None

    def values(self, metric: str) -> list[float] | None:
        if not self.metrics or not all(metric in m for m in self.metrics):
            return None
        return [float(m[metric]) for m in self.metrics]


@dataclass(frozen=True)
class Settings:
    confidence: float = 0.95
    tolerance: float = 0.05
    """Smallest relative difference called faster/slower (below it: same within noise)."""
    resamples: int = 2000
    seed: int = 0
    jointly: bool = True
    """Hold ``confidence`` over all the metrics of a case together (Bonferroni): a null
    reproduction calls any of its 11 metrics faster/slower at most 5% of the time, not each."""
    run_floor: bool = True
    """Widen a one-trial side by ``RUN_FLOORS`` (off: the request-to-request spread only)."""


DEFAULT_SETTINGS = Settings()


@dataclass(frozen=True)
class MetricVerdict:
    metric: str
    verdict: Word
    published: float | None = None
    reproduced: float | None = None
    difference: float | None = None
    relative: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    test: str = ""
    reason: str | None = None


@dataclass(frozen=True)
class CaseVerdict:
    label: str
    published_trials: int
    reproduced_trials: int
    metrics: tuple[MetricVerdict, ...]
    not_comparable: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()
    limits: tuple[str, ...] = field(default_factory=tuple)

    def of(self, metric: str) -> MetricVerdict | None:
        return next((m for m in self.metrics if m.metric == metric), None)


def judge_case(
    label: str,
    published: Side,
    reproduced: Side,
    *,
    not_comparable: Sequence[str] = (),
    caveats: Sequence[str] = (),
    settings: Settings = DEFAULT_SETTINGS,
) -> CaseVerdict:
    """Every headline metric of one case; all ``not comparable`` when a reason is given."""
    rng = np.random.default_rng(settings.seed)
    if settings.jointly:
        family = len(PERCENTILE_METRICS) + len(TRIAL_METRICS)
        per_metric = 1.0 - (1.0 - settings.confidence) / family
        settings = dataclasses.replace(settings, confidence=per_metric, jointly=False)
    verdicts = [
        _percentile(metric, column, q, published, reproduced, settings, rng)
        for metric, column, q in PERCENTILE_METRICS
    ]
    verdicts += [
        v for m in TRIAL_METRICS if (v := _over_trials(m, published, reproduced, settings))
    ]
    if not_comparable:
        why = "; ".join(not_comparable)
        verdicts = [
            MetricVerdict(
                v.metric,
                "not comparable",
                v.published,
                v.reproduced,
                v.difference,
                v.relative,
                test=v.test,
                reason=why,
            )
            for v in verdicts
        ]
    return CaseVerdict(
        label,
        published.trials,
        reproduced.trials,
        tuple(verdicts),
        tuple(not_comparable),
        tuple(caveats),
        _limits(published, reproduced),
    )


def _limits(published: Side, reproduced: Side) -> tuple[str, ...]:
    out = []
    if published.trials == 1:
        out.append(
            "the published side has one trial: its trial-to-trial spread is unknown and is "
            "taken to be the larger of the reproduction's and the run-to-run floor "
            "(docs/calibration.md)"
        )
    if published.trials == 1 and reproduced.trials == 1:
        out.append(
            "one trial on each side: the run-to-run spread is not measured; each percentile's "
            "interval is widened by the run-to-run floor measured on same-server runs of the "
            "simulator on a busy 2-core host (docs/calibration.md), so a change is called "
            "only beyond about 4 floors (25% on TPOT p50, 60% on TPOT p90); throughput is "
            "not judged: use --trials 3 or more on both sides"
        )
    if published.metrics and not published.samples:
        out.append(
            "the published side has no per-request records: percentile intervals come from "
            "the reproduced records alone, around the published figure"
        )
    return tuple(out)


def word(difference: float, low: float, high: float, base: float, metric: str, tol: float) -> Word:
    """faster/slower when the interval excludes 0 and the change is at least ``tol`` of base."""
    if low <= 0.0 <= high or (base != 0 and abs(difference) < tol * abs(base)):
        return "same within noise"
    up_is_faster = metric in HIGHER_IS_FASTER
    return "faster" if (difference > 0) == up_is_faster else "slower"


def _percentile(
    metric: str,
    column: str,
    q: int,
    published: Side,
    reproduced: Side,
    settings: Settings,
    rng: np.random.Generator,
) -> MetricVerdict:
    b_values = reproduced.columns(column)
    a_values = published.columns(column)
    a_point = _mean(published.values(metric)) if a_values is None else None
    if b_values is None or (a_values is None and a_point is None):
        return MetricVerdict(
            metric,
            "not comparable",
            a_point,
            None,
            reason=f"{column} per-request values or {metric} missing on a side",
        )
    floor = RUN_FLOORS.get(metric, 0.0) if settings.run_floor else 0.0
    b_stat, b_boot = _two_stage(b_values, q, settings.resamples, rng)
    if a_values is not None:
        a_stat, a_boot = _two_stage(a_values, q, settings.resamples, rng)
        spreads = (_spread(a_values, q), _spread(b_values, q))
        a_boot = _widen(a_boot, a_stat, len(a_values), spreads, floor, rng)
        test = (
            f"bootstrap of p{q} over per-request records ({settings.resamples} resamples of "
            f"trials, then requests; {published.trials} vs {reproduced.trials} trials"
            f"{_direct_note(a_values + b_values, settings.resamples)}"
        )
    else:
        assert a_point is not None
        a_stat = a_point
        figures = published.values(metric) or []
        own = float(np.std(figures, ddof=1)) if len(figures) >= 2 else None
        spreads = (own, _spread(b_values, q))
        a_boot = _widen(
            np.full(settings.resamples, a_point), a_point, published.trials, spreads, floor, rng
        )
        test = (
            f"bootstrap of p{q} over reproduced per-request records against the published "
            "figure (the published side has no records"
        )
    b_boot = _widen(b_boot, b_stat, len(b_values), (spreads[1], spreads[0]), floor, rng)
    test += _floor_note(metric, floor, published.trials, reproduced.trials) + ")"
    return _interval_verdict(metric, a_stat, b_stat, b_boot - a_boot, settings, test)


def _spread(trials: list[npt.NDArray[np.float64]] | None, q: int) -> float | None:
    """The trial-to-trial standard deviation of the q-th percentile (None below 2 trials)."""
    if trials is None or len(trials) < 2:
        return None
    return float(np.std([np.percentile(v, q) for v in trials], ddof=1))


def _widen(
    boot: npt.NDArray[np.float64],
    stat: float,
    trials: int,
    spreads: tuple[float | None, float | None],
    floor: float,
    rng: np.random.Generator,
) -> npt.NDArray[np.float64]:
    """A side's bootstrap plus the run-to-run spread its trials cannot show. ``spreads`` are
    this side's and the other side's measured trial-to-trial spreads (None below 2 trials).

    One trial: the larger of the floor (relative to its figure) and the other side's spread.
    Several: trials that agree more closely than the floor are topped up to it (two trials
    can agree by chance; the bootstrap over 2 trials also shows half their variance)."""
    own, other = spreads
    if trials == 1:
        spread = max(floor * abs(stat), other or 0.0)
    else:
        spread = math.sqrt(max(0.0, (floor * abs(stat)) ** 2 - (own or 0.0) ** 2) / trials)
    if spread <= 0.0:
        return boot
    widened: npt.NDArray[np.float64] = boot + rng.normal(0.0, spread, size=boot.size)
    return widened


def _floor_note(key: str, floor: float, a_trials: int, b_trials: int) -> str:
    if floor <= 0.0:
        return ""
    which = "a one-trial side widened" if min(a_trials, b_trials) == 1 else "trials topped up"
    return f"; {which} to the run-to-run floor of {key}, {floor:.1%} of its figure ({FLOOR_SOURCE})"


def _two_stage(
    trials: list[npt.NDArray[np.float64]], q: int, resamples: int, rng: np.random.Generator
) -> tuple[float, npt.NDArray[np.float64]]:
    """The mean over trials of the q-th percentile, and its bootstrap distribution."""
    point = float(np.mean([np.percentile(t, q) for t in trials]))
    per_trial = np.empty((len(trials), resamples))
    for i, values in enumerate(trials):
        per_trial[i] = resampled_percentiles(values, q, resamples, rng)
    if len(trials) == 1:
        return point, per_trial[0]
    chosen = rng.integers(0, len(trials), size=(resamples, len(trials)))
    return point, per_trial[chosen, np.arange(resamples)[:, None]].mean(axis=1)


def resampled_percentiles(
    values: npt.NDArray[np.float64], q: int, resamples: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """The q-th percentile of each of ``resamples`` bootstrap resamples of ``values``."""
    n = values.size
    if n * resamples <= DIRECT_CELLS:
        picks = rng.integers(0, n, size=(resamples, n))
        found: npt.NDArray[np.float64] = np.percentile(values[picks], q, axis=1)
        return found
    from scipy.special import bdtrc  # binomial survival; scipy.stats takes seconds to import

    ordered = np.sort(values)
    k = int(round((n - 1) * q / 100.0)) + 1  # nearest rank of the percentile, 1-based
    at_or_below = bdtrc(k - 1, n, np.arange(1, n + 1) / n)  # P(X*_(k) <= x_(j))
    drawn = np.searchsorted(at_or_below, rng.random(resamples), side="left")
    picked: npt.NDArray[np.float64] = ordered[np.minimum(drawn, n - 1)]
    return picked


def _interval_verdict(
    metric: str,
    a: float,
    b: float,
    differences: npt.NDArray[np.float64],
    settings: Settings,
    test: str,
) -> MetricVerdict:
    tail = (1.0 - settings.confidence) / 2.0 * 100.0
    low, high = (float(x) for x in np.percentile(differences, [tail, 100.0 - tail]))
    diff = b - a
    return MetricVerdict(
        metric,
        word(diff, low, high, a, metric, settings.tolerance),
        a,
        b,
        diff,
        None if a == 0 else diff / abs(a),
        low,
        high,
        test,
    )


def _over_trials(
    metric: str, published: Side, reproduced: Side, settings: Settings
) -> MetricVerdict | None:
    a, b = published.values(metric), reproduced.values(metric)
    if a is None and b is None:
        return None  # neither side measured it (goodput without an SLO)
    if a is None or b is None:
        return MetricVerdict(
            metric,
            "not comparable",
            _mean(a),
            _mean(b),
            reason=f"{metric} is not reported on the {_side_missing(a)} side",
        )
    ma, mb = float(np.mean(a)), float(np.mean(b))
    floor = RUN_FLOORS.get(metric, 0.0) if settings.run_floor else 0.0
    interval = trial_interval(a, b, settings.confidence, floor)
    if interval is None:
        return MetricVerdict(
            metric,
            "not comparable",
            ma,
            mb,
            mb - ma,
            reason="one trial on each side: no estimate of the noise (use --trials 2 or more)",
        )
    half, test = interval
    diff = mb - ma
    return MetricVerdict(
        metric,
        word(diff, diff - half, diff + half, ma, metric, settings.tolerance),
        ma,
        mb,
        diff,
        None if ma == 0 else diff / abs(ma),
        diff - half,
        diff + half,
        test,
    )


def trial_interval(
    a: Sequence[float], b: Sequence[float], confidence: float, floor: float = 0.0
) -> tuple[float, str] | None:
    """Half-width of the interval of mean(b) - mean(a) over trials, and the test's name.

    Against one trial, the t prediction interval takes that trial's spread to be the larger
    of the other side's and ``floor`` (relative to the single figure): two trials can agree
    by chance far more closely than the server repeats itself."""
    na, nb = len(a), len(b)
    if na >= 2 and nb >= 2:
        va, vb = float(np.var(a, ddof=1)) / na, float(np.var(b, ddof=1)) / nb
        se = math.sqrt(va + vb)
        if se == 0:
            return 0.0, f"Welch's t over trials ({na} vs {nb}; no spread)"
        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
        return t_quantile(confidence, df) * se, f"Welch's t interval over trials ({na} vs {nb})"
    if max(na, nb) < 2:
        return None
    many, single = (a, b[0]) if na >= 2 else (b, a[0])
    n = len(many)
    measured = float(np.std(many, ddof=1))
    own = max(measured, floor * abs(single))
    note = (
        f"; the single trial's spread is the run-to-run floor, {floor:.1%} of its figure "
        f"({FLOOR_SOURCE})"
        if own > measured
        else ""
    )
    return (
        t_quantile(confidence, n - 1) * math.sqrt(own**2 + measured**2 / n),
        f"t prediction interval from {n} trials (the other side has one{note})",
    )


def _direct_note(trials: list[npt.NDArray[np.float64]], resamples: int) -> str:
    if all(t.size * resamples <= DIRECT_CELLS for t in trials):
        return ""
    return "; large trials drawn by nearest-rank order statistic"


def _side_missing(published: Sequence[float] | None) -> str:
    return "published" if published is None else "reproduced"


def _mean(values: Sequence[float] | None) -> float | None:
    return None if not values else float(np.mean(values))

"""Repeated trials: mean and t-based confidence interval per metric, and Welch's comparison.

With one trial the spread is unknown, and so is every interval and comparison built on
it: those fields are None and the verdicts say ``unknown``, never a made-up zero.

Judged together (``compare_trials``), the metrics share one error rate: Holm's step-down
correction keeps the chance that any null difference is called beyond noise at most
1 - confidence (5%) over the whole set, not 5% per metric (ten metrics at 5% each called
about one in three null comparisons beyond noise somewhere). A metric whose two means are
both within ``NEGLIGIBLE`` of zero (a cache read ratio of 0.0002 against 0.0003) is never
called beyond noise: there is no difference there worth the name.

One trial against several: that trial's spread is unknown, and is taken to be the larger of
the other side's and ``COMPARE_FLOORS``, how far the metric moved from run to run on
same-server runs (docs/calibration.md); a t test from the other side's trials then judges it
(a prediction interval). One trial against one stays unknown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import numpy as np

from inferlab_bench.validity.inputs import FloatArray
from inferlab_bench.validity.verdict import Figures, Verdict

CONFIDENCE = 0.95
HEADLINE_METRICS = (
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "p50_ttft_ms",
    "p99_ttft_ms",
    "p50_tpot_ms",
    "p50_request_latency_ms",
    "p99_request_latency_ms",
    "goodput",
    "good_request_ratio",
)

Noise = Literal["beyond_noise", "within_noise", "unknown"]
NEGLIGIBLE = 1e-3
"""Both means within this of zero: no difference is called beyond noise."""
COMPARE_FLOORS: Mapping[str, float] = MappingProxyType(
    {
        "request_throughput": 0.10,
        "output_throughput": 0.10,
        "total_token_throughput": 0.10,
        "p50_ttft_ms": 0.10,
        "p99_ttft_ms": 0.35,
        "p50_tpot_ms": 0.07,
        "p50_request_latency_ms": 0.07,
        "p99_request_latency_ms": 0.24,
    }
)
"""Relative sd of one run's figure over same-server runs, its requests' spread included
(compare has no per-request records), 2026-12-07 05:41-06:36 UTC: the calibration's
simulator, c=4, 48 requests a run, on 2 cores at load 8-30, 3 runs with a CPU hog on every
core (TTFT p50 9.3%, p99 30%; TPOT p50 6.3%; E2E p50 6.8%, p99 24%; throughput 9.9%),
p99 TTFT at least the 34.5% of 9 runs without one. A run of fewer requests has a noisier
p99 than this covers."""


class MetricSummary(Figures):
    """One metric over repeated trials; ``verdict`` is unknown below two trials."""

    metric: str
    trials: int
    mean: float
    stddev: float | None
    ci_low: float | None
    ci_high: float | None
    ci_half_width: float | None
    confidence: float
    verdict: Verdict


class NoiseComparison(Figures):
    """Welch's two-sample t-test of metric b against metric a."""

    metric: str
    a_trials: int
    b_trials: int
    a_mean: float
    b_mean: float
    difference: float
    relative_difference: float | None
    t_statistic: float | None
    degrees_of_freedom: float | None
    p_value: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    noise: Noise
    adjusted_p_value: float | None = None
    """Holm-adjusted over the metrics judged together (None: judged alone)."""
    judged_together: int = 1
    negligible: bool = False
    """Both means ~0 (within ``NEGLIGIBLE``): within noise whatever the test says."""
    floor: float | None = None
    """The run-to-run floor taken as a one-trial side's spread (``COMPARE_FLOORS``)."""


def t_quantile(confidence: float, df: float) -> float:
    """Two-sided Student t critical value: P(|T| <= q) = confidence."""
    from scipy.special import stdtrit  # 0.1 s to import: only when trials are summarized

    return float(stdtrit(df, 0.5 + confidence / 2.0))


def summarize(
    metric: str, values: Sequence[float], confidence: float = CONFIDENCE
) -> MetricSummary:
    """Mean, sample stddev and t-interval of the mean of one metric's trial values."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0 or not np.isfinite(array).all():
        raise ValueError(f"{metric}: trial values must be finite and non-empty, got {values!r}")
    n, mean = int(array.size), float(array.mean())
    if n < 2:
        return MetricSummary(
            metric=metric,
            trials=n,
            mean=mean,
            stddev=None,
            ci_low=None,
            ci_high=None,
            ci_half_width=None,
            confidence=confidence,
            verdict=Verdict.UNKNOWN,
        )
    stddev = float(array.std(ddof=1))
    half = t_quantile(confidence, n - 1) * stddev / math.sqrt(n)
    return MetricSummary(
        metric=metric,
        trials=n,
        mean=mean,
        stddev=stddev,
        ci_low=mean - half,
        ci_high=mean + half,
        ci_half_width=half,
        confidence=confidence,
        verdict=Verdict.PASS,
    )


def trial_values(trials: Sequence[Mapping[str, float]], metric: str) -> list[float] | None:
    """The metric's value in every trial (None when some trial lacks it)."""
    if not all(metric in trial for trial in trials):
        return None
    return [float(trial[metric]) for trial in trials]


def summarize_trials(
    trials: Sequence[Mapping[str, float]],
    metrics: Sequence[str] = HEADLINE_METRICS,
    confidence: float = CONFIDENCE,
) -> tuple[MetricSummary, ...]:
    """A summary for each listed metric present in every trial's metrics."""
    found = ((m, trial_values(trials, m)) for m in metrics)
    return tuple(summarize(m, values, confidence) for m, values in found if values)


@dataclass(frozen=True)
class _WelchTest:
    t_statistic: float | None = None
    degrees_of_freedom: float | None = None
    p_value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    noise: Noise = "unknown"


def welch(
    metric: str,
    a: Sequence[float],
    b: Sequence[float],
    confidence: float = CONFIDENCE,
    floor: float | None = None,
) -> NoiseComparison:
    """Whether mean(b) - mean(a) is beyond the trial-to-trial noise (two-sided Welch test;
    against a single trial, a t test whose spread is at least ``floor``)."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.size == 0 or xb.size == 0:
        raise ValueError(f"{metric}: both samples need at least one trial")
    ma, mb = float(xa.mean()), float(xb.mean())
    if min(xa.size, xb.size) >= 2:
        test = _welch_test(xa, xb, confidence)
    elif max(xa.size, xb.size) >= 2 and floor:
        test = _single_test(xa, xb, confidence, floor)
    else:
        test, floor = _WelchTest(), None
    return NoiseComparison(
        metric=metric,
        a_trials=int(xa.size),
        b_trials=int(xb.size),
        a_mean=ma,
        b_mean=mb,
        difference=mb - ma,
        relative_difference=(mb - ma) / abs(ma) if ma else None,
        t_statistic=test.t_statistic,
        degrees_of_freedom=test.degrees_of_freedom,
        p_value=test.p_value,
        ci_low=test.ci_low,
        ci_high=test.ci_high,
        confidence=confidence,
        noise=test.noise,
        floor=floor if min(xa.size, xb.size) == 1 else None,
    )


def _single_test(xa: FloatArray, xb: FloatArray, confidence: float, floor: float) -> _WelchTest:
    """One trial against n: the single trial's spread is the larger of the n trials' and the
    floor (relative to its figure); t with n - 1 degrees of freedom."""
    from scipy.special import stdtr

    many, single = (xa, float(xb[0])) if xa.size >= 2 else (xb, float(xa[0]))
    n, measured = many.size, float(many.std(ddof=1))
    own = max(measured, floor * abs(single))
    diff, se = float(xb.mean() - xa.mean()), math.sqrt(measured**2 / n + own**2)
    if se == 0:
        return _WelchTest(p_value=1.0, ci_low=diff, ci_high=diff, noise="within_noise")
    t, df = diff / se, float(n - 1)
    p = float(2.0 * stdtr(df, -abs(t)))
    half = t_quantile(confidence, df) * se
    return _WelchTest(
        t_statistic=t,
        degrees_of_freedom=df,
        p_value=p,
        ci_low=diff - half,
        ci_high=diff + half,
        noise="beyond_noise" if p < 1 - confidence else "within_noise",
    )


def _welch_test(xa: FloatArray, xb: FloatArray, confidence: float) -> _WelchTest:
    va, vb = float(xa.var(ddof=1)) / xa.size, float(xb.var(ddof=1)) / xb.size
    diff, se = float(xb.mean() - xa.mean()), math.sqrt(va + vb)
    if se == 0:
        # No spread in either sample: any difference at all exceeds the observed noise.
        return _WelchTest(
            p_value=1.0 if diff == 0 else 0.0,
            ci_low=diff,
            ci_high=diff,
            noise="within_noise" if diff == 0 else "beyond_noise",
        )
    df = (va + vb) ** 2 / (va**2 / (xa.size - 1) + vb**2 / (xb.size - 1))
    t = diff / se
    from scipy.special import stdtr

    p = float(2.0 * stdtr(df, -abs(t)))
    half = t_quantile(confidence, df) * se
    return _WelchTest(
        t_statistic=t,
        degrees_of_freedom=df,
        p_value=p,
        ci_low=diff - half,
        ci_high=diff + half,
        noise="beyond_noise" if p < 1 - confidence else "within_noise",
    )


def compare_trials(
    a: Sequence[Mapping[str, float]],
    b: Sequence[Mapping[str, float]],
    metrics: Sequence[str] = HEADLINE_METRICS,
    confidence: float = CONFIDENCE,
) -> tuple[NoiseComparison, ...]:
    """Welch's comparison for each listed metric present in every trial of both sides, its
    p-value Holm-adjusted over them all (see the module docstring)."""
    out = []
    for metric in metrics:
        va, vb = trial_values(a, metric), trial_values(b, metric)
        if va and vb:
            out.append(welch(metric, va, vb, confidence, COMPARE_FLOORS.get(metric)))
    return holm(out, 1.0 - confidence)


def holm(comparisons: Sequence[NoiseComparison], alpha: float) -> tuple[NoiseComparison, ...]:
    """Holm's step-down adjustment of the p-values; beyond noise only below ``alpha`` after it."""
    tested = [i for i, c in enumerate(comparisons) if c.p_value is not None]
    adjusted: dict[int, float] = {}
    running = 0.0
    order = sorted(tested, key=lambda i: comparisons[i].p_value or 0.0)
    for rank, i in enumerate(order):
        p = comparisons[i].p_value
        assert p is not None
        running = max(running, min(1.0, (len(order) - rank) * p))
        adjusted[i] = running
    out = []
    for i, c in enumerate(comparisons):
        if i not in adjusted:
            out.append(c.model_copy(update={"judged_together": len(order)}))
            continue
        negligible = abs(c.a_mean) < NEGLIGIBLE and abs(c.b_mean) < NEGLIGIBLE
        noise: Noise = "beyond_noise" if adjusted[i] < alpha and not negligible else "within_noise"
        out.append(
            c.model_copy(
                update={
                    "adjusted_p_value": adjusted[i],
                    "judged_together": len(order),
                    "negligible": negligible,
                    "noise": noise,
                }
            )
        )
    return tuple(out)

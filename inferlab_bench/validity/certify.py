"""What a percentile of n requests can claim: MLPerf Inference's early-stopping rule.

A latency percentile p from n samples is an estimate. MLPerf Inference's loadgen decides how
many samples a claim needs with a one-sided binomial tail (its ``early_stopping.cc``): with t
samples observed above a latency bound, the run supports "the p-th percentile is within the
bound" at confidence c when it has at least h(t) + t samples, where h(t) is the least h with

    I_{p-d}(h, t + 1) <= 1 - c                    (I: the regularized incomplete beta)

(the probability of seeing at most t slow samples among h + t if the true share of slow ones
were 1 - p). The loadgen uses d = 0 and c = 0.99 in every scenario, and so do we.

Two uses follow, both from the same h(t):

- against an SLO bound: with t of n samples over the bound, the bound holds at percentile p
  when n >= h(t) + t (none over: p90 needs 44 samples, p99 459);
- as an estimate: n samples certify the p-th percentile when n >= h(1) + 1, and the value
  that may be claimed is the sorted sample at index n - t for the largest t with
  n >= h(t) + t, that is, after discarding the t - 1 highest samples.
"""

from __future__ import annotations

import functools

import numpy as np

from inferlab_bench.validity.inputs import FloatArray
from inferlab_bench.validity.verdict import Figures

CONFIDENCE = 0.99
PERCENTILES = (90.0, 95.0, 99.0)


class PercentileClaim(Figures):
    """One percentile of one metric: whether the sample size certifies it, and its value."""

    metric: str
    percentile: float
    samples: int
    needed_samples: int
    """The fewest samples that certify this percentile as an estimate (h(1) + 1)."""
    certified: bool
    value: float | None
    """The plain percentile of the samples (as tables print it)."""
    early_stopping_value: float | None
    """What may be claimed: the sorted sample at index n - t (None when not certified)."""
    discarded_highest: int | None
    """t - 1: how many of the highest samples the claim discards."""


class MetricCertification(Figures):
    """Every reported percentile of one metric, and the highest one the run certifies."""

    metric: str
    samples: int
    highest_certified_percentile: float | None
    claims: tuple[PercentileClaim, ...]


class BoundClaim(Figures):
    """One SLO bound at the percentile the SLO asks (its good-request ratio): does it hold?"""

    metric: str
    bound_ms: float
    percentile: float
    samples: int
    over_bound: int
    """Requests over the bound, failed ones included (they did not meet it)."""
    needed_samples: int
    """h(t) + t for the t over the bound: what the claim "it holds" needs."""
    met_by_share: bool
    """The plain share within the bound reaches the percentile."""
    certified: bool
    """The loadgen rule supports "the bound holds at this percentile" (99% confidence)."""


def bound_claim(values: FloatArray, metric: str, bound_ms: float, percentile: float) -> BoundClaim:
    """Whether ``values`` (NaN for a request that never produced the metric) keep
    ``bound_ms`` at ``percentile``, by share and by the early-stopping rule."""
    n = int(values.size)
    over = int(np.sum(~(np.isfinite(values) & (values <= bound_ms))))
    needed = samples_for_bound(over, percentile)
    return BoundClaim(
        metric=metric,
        bound_ms=bound_ms,
        percentile=percentile,
        samples=n,
        over_bound=over,
        needed_samples=needed,
        met_by_share=n > 0 and (n - over) >= n * percentile / 100.0,
        certified=n >= needed,
    )


@functools.cache
def passing_count(slow: int, percentile: float, confidence: float = CONFIDENCE) -> int:
    """h(t): the least h with I_p(h, t + 1) <= 1 - c, for ``slow`` = t samples over a bound.

    I_p(h, t + 1) falls as h grows, so the least h is found by doubling, then bisection.
    """
    from scipy.special import betainc  # imported on first use, not with the package

    p = percentile / 100.0
    if not 0.0 < p < 1.0 or slow < 0:
        raise ValueError(f"percentile {percentile} must lie in (0, 100), slow {slow} >= 0")
    alpha = 1.0 - confidence
    high = 1
    while betainc(high, slow + 1, p) > alpha:
        high *= 2
    low = high // 2
    while high - low > 1:  # invariant: low fails (or is 0), high passes
        middle = (low + high) // 2
        if betainc(middle, slow + 1, p) > alpha:
            low = middle
        else:
            high = middle
    return high


def samples_for_bound(slow: int, percentile: float) -> int:
    """Samples an SLO bound at ``percentile`` needs when ``slow`` of them are over it."""
    return passing_count(slow, percentile) + slow


def samples_for_estimate(percentile: float) -> int:
    """Samples that certify ``percentile`` as an estimate: h(1) + 1."""
    return samples_for_bound(1, percentile)


def bound_holds(samples: int, slow: int, percentile: float) -> bool:
    """Whether ``samples`` with ``slow`` over the bound support it at ``percentile``."""
    return samples >= samples_for_bound(slow, percentile)


def claim(values: FloatArray, metric: str, percentile: float) -> PercentileClaim:
    """The claim ``values`` (finite samples) support at ``percentile``."""
    ordered = np.sort(values[np.isfinite(values)])
    n = int(ordered.size)
    needed = samples_for_estimate(percentile)
    plain = float(np.percentile(ordered, percentile)) if n else None
    if n < needed:
        return PercentileClaim(
            metric=metric,
            percentile=percentile,
            samples=n,
            needed_samples=needed,
            certified=False,
            value=plain,
            early_stopping_value=None,
            discarded_highest=None,
        )
    slow = 1
    while n >= samples_for_bound(slow + 1, percentile):
        slow += 1
    return PercentileClaim(
        metric=metric,
        percentile=percentile,
        samples=n,
        needed_samples=needed,
        certified=True,
        value=plain,
        early_stopping_value=float(ordered[n - slow]),
        discarded_highest=slow - 1,
    )


def certify(
    values: FloatArray, metric: str, percentiles: tuple[float, ...] = PERCENTILES
) -> MetricCertification:
    """Each reported percentile of one metric, and the highest the sample size certifies."""
    claims = tuple(claim(values, metric, p) for p in percentiles)
    certified = [c.percentile for c in claims if c.certified]
    return MetricCertification(
        metric=metric,
        samples=claims[0].samples if claims else 0,
        highest_certified_percentile=max(certified) if certified else None,
        claims=claims,
    )

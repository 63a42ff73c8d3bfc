"""One probe judged like a case: valid or not (and why), and whether it met the SLO criterion.

A probe whose validity fails (the load generator fell behind, tokens did not reconcile, the
cache was not cold, or the case itself failed) is evidence neither for nor against the SLO:
it is never told to the planner. A request that failed at the server is a measurement: it
counts as over every bound. Pure: values in, values out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from inferlab_bench.capacity.spec import Criterion
from inferlab_bench.metric_tags import LATENCIES_MS
from inferlab_bench.protocol import BenchRequestSloInput

INVALIDATING = (
    "load_generator_kept_up",
    "prompt_tokens_reconciled",
    "output_lengths_honored",
    "cache_cold",
)
"""Verdicts that make a probe measure something other than the server at that load."""
CLIENT_LIMIT = "load_generator_kept_up"
GOOD_FRACTION_TAG = "good_request_fraction"
"""AIPerf's own name for good / attempted requests (its max-goodput-under-slo recipe)."""
THROUGHPUT_TAG = "request_throughput"

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class ProbeFigures:
    """What one finished case says, as read from its directory."""

    status: str
    error: str | None
    verdicts: Mapping[str, str]
    failed_checks: tuple[str, ...]
    latencies: Mapping[str, FloatArray]
    """``ttft_ms`` / ``tpot_ms`` / ``request_latency_ms`` per profiling request (NaN: none)."""
    succeeded: BoolArray
    good_ratio: float | None
    goodput: float | None
    request_throughput: float | None
    certified: Mapping[str, bool]
    """Per SLO metric: whether validity's early-stopping rule certifies the bound's claim."""
    verdict: str | None = None
    """validity.json's overall verdict (what ``report`` shows); None: no document."""


@dataclass(frozen=True)
class MetricFigure:
    """One SLO bound at the criterion's share of requests."""

    metric: str
    bound_ms: float
    samples: int
    over: int
    """Requests over the bound, failed ones included."""
    value: float | None
    """The nearest-rank value at the share (None where it falls on a failed request)."""
    met: bool
    certified: bool | None

    @property
    def overshoot(self) -> float:
        """value / bound (infinite when the value is a failed request)."""
        return math.inf if self.value is None else self.value / self.bound_ms


@dataclass(frozen=True)
class ProbeJudgement:
    valid: bool
    invalid_reason: str | None
    client_limited: bool
    """Invalid because the load generator could not drive the load."""
    slo_met: bool | None
    """None for an invalid probe: it says nothing about the SLO."""
    metrics: tuple[MetricFigure, ...]
    attainment: float | None
    goodput: float | None
    request_throughput: float | None
    validity: str = "unknown"
    """The case's overall validity verdict, as ``report`` shows it for the same folder."""
    failed_verdicts: tuple[str, ...] = ()
    """Every verdict that failed, whether or not it stops the probe from counting."""


def judge(figures: ProbeFigures, slo: BenchRequestSloInput, criterion: Criterion) -> ProbeJudgement:
    """Validity first; then the criterion, over every profiling request."""
    metrics = tuple(_metric(figures, slo, name, criterion.ratio) for name in bounds(slo))
    reason = invalid_reason(figures)
    if reason is not None:
        met = None
    elif criterion.kind == "attainment":
        # The same comparison as AIPerf's filter (value >= threshold), so the two never differ.
        met = figures.good_ratio is not None and figures.good_ratio >= criterion.ratio
    else:
        met = all(m.met for m in metrics)
    return ProbeJudgement(
        valid=reason is None,
        invalid_reason=reason,
        client_limited=figures.status == "succeeded"
        and figures.verdicts.get(CLIENT_LIMIT) == "fail",
        slo_met=met,
        metrics=metrics,
        attainment=figures.good_ratio,
        goodput=figures.goodput,
        request_throughput=figures.request_throughput,
        validity=overall_validity(figures),
        failed_verdicts=tuple(sorted(k for k, v in figures.verdicts.items() if v == "fail")),
    )


def overall_validity(figures: ProbeFigures) -> str:
    """validity.json's verdict; for a failed case ``fail``; without a document ``unknown``."""
    if figures.status != "succeeded":
        return "fail"
    if figures.verdict is not None:
        return figures.verdict
    if any(v == "fail" for v in figures.verdicts.values()):
        return "fail"
    return "unknown" if not figures.verdicts else "pass"


def bounds(slo: BenchRequestSloInput) -> dict[str, float]:
    """Our metric name -> bound (ms), for the bounds the SLO sets."""
    found = {name: getattr(slo, name) for name in LATENCIES_MS}
    return {name: float(bound) for name, bound in found.items() if bound is not None}


def invalid_reason(figures: ProbeFigures) -> str | None:
    """Why the probe cannot count, or None."""
    if figures.status != "succeeded":
        return f"the case failed: {figures.error or 'no error given'}"
    failed = [v for v in INVALIDATING if figures.verdicts.get(v) == "fail"]
    if not failed:
        return None
    checks = f" ({'; '.join(figures.failed_checks)})" if figures.failed_checks else ""
    return f"validity failed: {', '.join(failed)}{checks}"


def planner_metrics(
    judgement: ProbeJudgement, criterion: Criterion
) -> dict[str, dict[str, float | None]]:
    """What the planner reads (AIPerf metric tag -> {stat: value}), made from our judgement
    so that AIPerf's filters and our verdict agree by construction."""
    stat = f"p{criterion.value:g}"
    found: dict[str, dict[str, float | None]] = {
        THROUGHPUT_TAG: {"avg": judgement.request_throughput},
        GOOD_FRACTION_TAG: {"avg": judgement.attainment},
    }
    for m in judgement.metrics:
        found[LATENCIES_MS[m.metric]] = {stat: m.value}
    return found


def nearest_rank(values: FloatArray, ratio: float) -> float:
    """The sample at rank ceil(n * ratio): at or below a bound iff that share is within it."""
    ordered = np.sort(values)
    rank = max(1, math.ceil(len(ordered) * ratio - 1e-9))
    return float(ordered[rank - 1])


def _metric(
    figures: ProbeFigures, slo: BenchRequestSloInput, name: str, ratio: float
) -> MetricFigure:
    bound = float(getattr(slo, name))
    raw = figures.latencies.get(name)
    if raw is None or not len(raw):
        return MetricFigure(name, bound, 0, 0, None, False, None)
    # A failed request, or one that never produced the metric, is over every bound.
    judged = np.where(figures.succeeded & np.isfinite(raw), raw, np.inf)
    value = nearest_rank(judged, ratio)
    over = int(np.sum(judged > bound))
    return MetricFigure(
        metric=name,
        bound_ms=bound,
        samples=int(judged.size),
        over=over,
        value=value if math.isfinite(value) else None,
        met=math.isfinite(value) and value <= bound,
        certified=figures.certified.get(name),
    )

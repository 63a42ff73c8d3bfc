"""Pure normalization of AIPerf's summary into ``aiperf-summary-v1`` (exact keys, finite)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inferlab_bench.errors import MetricsError
from inferlab_bench.metric_tags import CACHE_READ_PCT, LATENCIES_MS, THROUGHPUTS
from inferlab_bench.protocol import BenchRequestSloResult

DISTRIBUTIONS = LATENCIES_MS
STATISTICS = {
    "mean": "avg",
    "min": "min",
    "max": "max",
    "stddev": "std",
    "p50": "p50",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
}
CACHE_READ_TAG = CACHE_READ_PCT


@dataclass(frozen=True)
class MetricScope:
    """Which optional key groups the schema includes for this case."""

    tpot_applicable: bool
    latencies_measured: bool
    """False when no request completed: there is no latency to describe (goodput is 0)."""
    cache_reads_reported: bool
    slo_set: bool


def expected_keys(scope: MetricScope) -> set[str]:
    """The exact key set of ``aiperf-summary-v1`` for ``scope``."""
    keys = set(THROUGHPUTS)
    if scope.latencies_measured:
        names = [n for n in DISTRIBUTIONS if n != "tpot_ms" or scope.tpot_applicable]
        keys |= {f"{stat}_{name}" for name in names for stat in STATISTICS}
    if scope.cache_reads_reported:
        keys.add("prompt_cache_read_ratio")
    if scope.slo_set:
        keys |= {"good_request_ratio", "goodput"}
    return keys


def normalize(
    summary: Mapping[str, Any], scope: MetricScope, slo: BenchRequestSloResult | None
) -> dict[str, float]:
    """Map AIPerf summary tags to our names; missing or non-finite values are MetricsError."""
    metrics = {name: _throughput(summary, tag, scope) for name, tag in THROUGHPUTS.items()}
    if scope.latencies_measured:
        for name, tag in DISTRIBUTIONS.items():
            if name != "tpot_ms" or scope.tpot_applicable:
                metrics.update(_distribution(summary, name, tag))
    if scope.cache_reads_reported:
        metrics["prompt_cache_read_ratio"] = _cache_ratio(summary)
    if scope.slo_set:
        if slo is None:
            raise MetricsError("request_slo: an SLO is set but no SLO evidence was computed")
        metrics["good_request_ratio"] = _finite("good_request_ratio", slo.good_request_ratio)
        metrics["goodput"] = _finite("goodput", slo.goodput)
    assert set(metrics) == expected_keys(scope)
    return metrics


def summary_value(summary: Mapping[str, Any], tag: str, stat: str = "avg") -> float | None:
    """``summary[tag][stat]`` as a float, or None when AIPerf did not write it."""
    entry = summary.get(tag)
    if not isinstance(entry, Mapping):
        return None
    value = entry.get(stat)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _throughput(summary: Mapping[str, Any], tag: str, scope: MetricScope) -> float:
    value = summary_value(summary, tag)
    if value is None and not scope.latencies_measured:
        return 0.0  # nothing completed: zero throughput is the measurement, not a gap
    return _finite(tag, _required(tag, "avg", value))


def _distribution(summary: Mapping[str, Any], name: str, tag: str) -> dict[str, float]:
    out = {}
    for ours, theirs in STATISTICS.items():
        value = _required(tag, theirs, summary_value(summary, tag, theirs))
        out[f"{ours}_{name}"] = _finite(f"{tag}.{theirs}", value)
    return out


def _cache_ratio(summary: Mapping[str, Any]) -> float:
    pct = _finite(
        CACHE_READ_TAG, _required(CACHE_READ_TAG, "avg", summary_value(summary, CACHE_READ_TAG))
    )
    if not 0.0 <= pct <= 100.0:
        raise MetricsError(f"{CACHE_READ_TAG}: expected a percentage in 0..100, found {pct}")
    return pct / 100.0


def _required(tag: str, stat: str, value: float | None) -> float:
    if value is None:
        raise MetricsError(
            f"AIPerf summary: {tag}.{stat} is missing",
            hint="the summary does not describe the profiling phase; see the AIPerf log",
        )
    return value


def _finite(name: str, value: float) -> float:
    if not math.isfinite(value):
        raise MetricsError(f"metric {name}: expected a finite number, found {value}")
    return value

"""metrics: aiperf-summary-v1 from AIPerf's summary, exact key set, no silent gaps."""

from __future__ import annotations

import math
from typing import Any

import pytest

from inferlab_bench.case.metrics import MetricScope, expected_keys, normalize
from inferlab_bench.errors import MetricsError
from inferlab_bench.protocol import BenchRequestSloResult

STATS = {
    "avg": 10.0,
    "min": 1.0,
    "max": 20.0,
    "std": 2.0,
    "p50": 9.0,
    "p90": 15.0,
    "p95": 17.0,
    "p99": 19.0,
}
SUMMARY: dict[str, Any] = {
    "request_throughput": {"avg": 3.0},
    "output_token_throughput": {"avg": 30.0},
    "total_token_throughput": {"avg": 90.0},
    "request_latency": dict(STATS),
    "time_to_first_token": dict(STATS),
    "inter_token_latency": dict(STATS),
    "overall_usage_prompt_cache_read_pct": {"avg": 25.0},
}
SLO = BenchRequestSloResult(
    good_requests=2,
    good_request_ratio=0.5,
    goodput=1.5,
    profiling_duration_seconds=1.3,
    profiling_duration_source="native-profiling-request-window",
    request_count_reconciled=True,
)
FULL = MetricScope(
    tpot_applicable=True, latencies_measured=True, cache_reads_reported=True, slo_set=True
)


def test_full_key_set_and_mapping() -> None:
    metrics = normalize(SUMMARY, FULL, SLO)
    assert set(metrics) == expected_keys(FULL)
    assert len(metrics) == 3 + 24 + 1 + 2
    assert metrics["output_throughput"] == 30.0 and metrics["stddev_ttft_ms"] == 2.0
    assert metrics["p99_tpot_ms"] == 19.0 and metrics["mean_request_latency_ms"] == 10.0
    assert metrics["prompt_cache_read_ratio"] == 0.25
    assert metrics["good_request_ratio"] == 0.5 and metrics["goodput"] == 1.5


def test_optional_groups_are_omitted() -> None:
    scope = MetricScope(
        tpot_applicable=False, latencies_measured=True, cache_reads_reported=False, slo_set=False
    )
    metrics = normalize(SUMMARY, scope, None)
    assert not any(key.endswith("tpot_ms") for key in metrics)
    assert "prompt_cache_read_ratio" not in metrics and "goodput" not in metrics
    assert len(metrics) == 3 + 16


def test_nothing_completed_gives_zero_throughput_and_no_latencies() -> None:
    scope = MetricScope(
        tpot_applicable=True, latencies_measured=False, cache_reads_reported=False, slo_set=True
    )
    zero = BenchRequestSloResult(
        **{**SLO.model_dump(), "good_requests": 0, "good_request_ratio": 0.0, "goodput": 0.0}
    )
    metrics = normalize({}, scope, zero)
    assert metrics == {
        "request_throughput": 0.0,
        "output_throughput": 0.0,
        "total_token_throughput": 0.0,
        "good_request_ratio": 0.0,
        "goodput": 0.0,
    }


@pytest.mark.parametrize(
    ("tag", "value", "message"),
    [
        ("time_to_first_token", {**STATS, "p95": None}, r"time_to_first_token\.p95 is missing"),
        ("request_throughput", {"avg": math.inf}, "expected a finite number"),
        ("output_token_throughput", None, r"output_token_throughput\.avg is missing"),
        ("overall_usage_prompt_cache_read_pct", {"avg": 140.0}, "percentage"),
    ],
)
def test_missing_or_non_finite_values_are_errors(tag: str, value: Any, message: str) -> None:
    summary = {**SUMMARY, tag: value}
    with pytest.raises(MetricsError, match=message):
        normalize(summary, FULL, SLO)

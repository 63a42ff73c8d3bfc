"""Peers' real result files read as baselines (the fixtures' README says how they were made)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from inferlab_bench.errors import BaselineError
from inferlab_bench.publish.baselines import load_baseline, peer_kind

FIXTURES = Path(__file__).parent / "fixtures"
GUIDELLM = FIXTURES / "guidellm-0.8.1-sweep-c1-c2.json"


def test_guidellm_benchmarks_map_onto_our_names() -> None:
    baseline = load_baseline(GUIDELLM)
    assert (baseline.tool, baseline.version) == ("guidellm", "0.8.1")
    assert [c.label for c in baseline.cases] == ["c=1", "c=2"]
    raw = json.loads(GUIDELLM.read_text())["benchmarks"]
    for case, benchmark in zip(baseline.cases, raw, strict=True):
        assert case.model == "sim" and case.requests == 8
        assert case.samples is not None and case.samples["ttft_ms"].size == 8
        theirs = benchmark["metrics"]
        # Output throughput over the requests' window agrees with GuideLLM's own figure.
        own = theirs["output_tokens_per_second"]["successful"]["mean"]
        assert case.metrics["output_throughput"] == pytest.approx(own, rel=0.03)
        # Percentiles are recomputed from the per-request values (numpy's interpolation).
        ttft = [r["time_to_first_token_ms"] for r in benchmark["requests"]["successful"]]
        assert case.metrics["p50_ttft_ms"] == pytest.approx(float(np.percentile(ttft, 50)))
        e2e = theirs["request_latency"]["successful"]
        assert case.metrics["mean_request_latency_ms"] == pytest.approx(e2e["mean"] * 1000.0)
        assert "goodput" not in case.metrics and any("goodput" in u for u in case.unmapped)


def test_files_that_are_no_peers_are_refused_naming_them(tmp_path: Path) -> None:
    ours = tmp_path / "result.json"
    ours.write_text('{"schema_version": 1, "status": "succeeded"}')
    assert peer_kind(ours) is None and peer_kind(GUIDELLM) == "guidellm"
    with pytest.raises(BaselineError, match="neither a `vllm bench serve --save-result` file"):
        load_baseline(ours)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(BaselineError, match="broken.json: cannot read as JSON"):
        load_baseline(broken)


VLLM_DETAILED = FIXTURES / "vllm-0.33.0-c2-detailed.json"
VLLM_SUMMARY = FIXTURES / "vllm-0.33.0-c1.json"


def test_vllm_detailed_result_gives_per_request_values_that_agree_with_its_summary() -> None:
    baseline = load_baseline(VLLM_DETAILED)
    assert baseline.tool == "vllm bench serve" and peer_kind(VLLM_DETAILED) == baseline.tool
    (case,) = baseline.cases
    raw = json.loads(VLLM_DETAILED.read_text())
    assert (case.label, case.model, case.requests) == ("c=2", "sim", 8)
    assert case.samples is not None
    # Our per-request TPOT, (E2E - TTFT) / (tokens - 1), is vLLM's own: same median.
    assert float(np.median(case.samples["tpot_ms"])) == pytest.approx(raw["median_tpot_ms"])
    assert float(np.percentile(case.samples["ttft_ms"], 99)) == pytest.approx(raw["p99_ttft_ms"])
    assert float(np.median(case.samples["request_latency_ms"])) == pytest.approx(
        raw["median_e2el_ms"]
    )
    assert case.metrics["p50_request_latency_ms"] == raw["median_e2el_ms"]
    assert case.metrics["output_throughput"] == raw["output_throughput"]
    assert "p50_itl_ms" not in case.metrics and any(u.startswith("itl") for u in case.unmapped)


def test_vllm_summary_only_result_has_figures_but_no_samples() -> None:
    (case,) = load_baseline(VLLM_SUMMARY).cases
    raw = json.loads(VLLM_SUMMARY.read_text())
    assert case.label == "c=1" and case.samples is None
    assert case.metrics["p90_tpot_ms"] == raw["p90_tpot_ms"]
    assert case.metrics["p99_request_latency_ms"] == raw["p99_e2el_ms"]
    assert "goodput" not in case.metrics  # saved without --goodput: request_goodput is null

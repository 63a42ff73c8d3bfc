"""Peers' real result files read as their tools meant them (corpus/README.md says where each
file comes from): the load, the model, the request count and every figure we show, checked
against the file's own fields, and recomputed from its requests the way its tool does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from inferlab_bench.errors import BaselineError
from inferlab_bench.publish.baselines import (
    FORMATS,
    foreign_file,
    load_baseline,
    peer_kind,
    refusals,
)
from inferlab_bench.publish.peers.model import BaselineCase

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
FIXTURES = HERE / "fixtures"
STATS = {"mean": "mean", "median": "p50", "p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99"}


def _raw(path: Path) -> Any:
    text = path.read_text()
    if path.suffix == ".yaml":
        return yaml.safe_load(text)
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


# --- GuideLLM ----------------------------------------------------------------------------


def guidellm_percentile(values: list[float], q: float) -> float:
    """GuideLLM's rule, written out here independently: sorted distinct values, their shares
    summed in floating point, the first whose cumulative share reaches q."""
    distinct, counts = np.unique(values, return_counts=True)
    cdf = np.cumsum(counts / counts.sum())
    return float(distinct[min(int(np.searchsorted(cdf, q / 100, side="left")), len(distinct) - 1)])


GUIDELLM_V04 = {
    # file: (label, model, requests counted, requests kept)
    "0.5.0.dev0-qwen3-30b-a3b-tp4.json": ("c=1", "Qwen/Qwen3-30B-A3B", 19, 23),
    "0.5.0.dev0-qwen3-4b-tp2.json": ("c=1", "Qwen/Qwen3-4B-Thinking-2507", 26, 30),
    "0.5.0.dev0-qwen3-4b-tp4.json": ("c=1", "Qwen/Qwen3-4B-Thinking-2507", 26, 30),
    "0.5.0.dev0-gpt-oss-20b-tp4.json": ("c=1", "openai/gpt-oss-20b", 25, 30),
    "0.5.0.dev0-qwen3-4b-sanity.json": ("c=4", "Qwen/Qwen3-4B-Thinking-2507", 4, 4),
}


def _own(summary: dict[str, Any], column: str, scale: float = 1.0) -> dict[str, float]:
    out = {f"mean_{column}": summary["mean"] * scale}
    percentiles = summary.get("percentiles") or {}
    out[f"p50_{column}"] = percentiles.get("p50", summary["median"]) * scale
    for q in (90, 95, 99):
        out[f"p{q}_{column}"] = percentiles[f"p{q}"] * scale
    return out


@pytest.mark.parametrize("name", sorted(GUIDELLM_V04))
def test_guidellm_04_figures_are_its_own_and_its_window_is_honoured(name: str) -> None:
    path = CORPUS / "guidellm" / name
    raw = _raw(path)["benchmarks"][0]
    baseline = load_baseline(path)
    assert (baseline.tool, baseline.version) == ("guidellm", "0.5.0.dev0")
    (case,) = baseline.cases
    label, model, counted, kept = GUIDELLM_V04[name]
    assert (case.label, case.model, case.requests) == (label, model, counted)
    metrics = raw["metrics"]
    own = _own(metrics["time_to_first_token_ms"]["successful"], "ttft_ms")
    own |= _own(metrics["request_latency"]["successful"], "request_latency_ms", 1000.0)
    own["output_throughput"] = metrics["output_tokens_per_second"]["successful"]["mean"]
    own["request_throughput"] = metrics["requests_per_second"]["successful"]["mean"]
    for metric, value in own.items():
        assert case.metrics[metric] == pytest.approx(value, rel=1e-12), metric
    # The window: the requests overlapping measure_start..measure_end are exactly the ones
    # GuideLLM's own figures count; recomputed with its percentile rule they give its figures.
    window = raw["scheduler_metrics"]
    successful = raw["requests"]["successful"]
    inside = [
        r
        for r in successful
        if r["request_end_time"] >= window["measure_start_time"]
        and r["request_start_time"] <= window["measure_end_time"]
    ]
    assert (len(inside), len(successful)) == (counted, kept)
    ttft = [r["time_to_first_token_ms"] for r in inside]
    assert float(np.mean(ttft)) == pytest.approx(own["mean_ttft_ms"], rel=1e-9)
    for q in (50, 90, 95, 99):
        assert guidellm_percentile(ttft, q) == pytest.approx(own[f"p{q}_ttft_ms"], rel=1e-12)
    # TPOT: GuideLLM's ITL figures weigh requests by tokens (its count is tokens, not
    # requests), so ours is recomputed per request from the same window.
    assert metrics["inter_token_latency_ms"]["successful"]["count"] > counted
    itl = [r["inter_token_latency_ms"] for r in inside]
    assert case.metrics["mean_tpot_ms"] == pytest.approx(float(np.mean(itl)))
    for q in (50, 90, 99):
        assert case.metrics[f"p{q}_tpot_ms"] == guidellm_percentile(itl, q)
    assert case.samples is not None and case.samples[0]["ttft_ms"].size == counted
    if kept > counted:
        assert any("measurement window" in n for n in case.notes)
    assert refusals(case) == []


def test_the_window_changes_what_a_careless_reader_would_show() -> None:
    """The issue's file: every successful request gives a p99 TTFT of 988 ms; GuideLLM's own
    figure, over its measurement window, is 72.8 ms (the mean 112.1 vs 60.0)."""
    path = CORPUS / "guidellm" / "0.5.0.dev0-qwen3-30b-a3b-tp4.json"
    everyone = [
        r["time_to_first_token_ms"] for r in _raw(path)["benchmarks"][0]["requests"]["successful"]
    ]
    (case,) = load_baseline(path).cases
    assert round(float(np.percentile(everyone, 99)), 1) == 988.3
    assert round(float(np.mean(everyone)), 1) == 112.1
    assert round(case.metrics["p99_ttft_ms"], 1) == 72.8
    assert round(case.metrics["mean_ttft_ms"], 1) == 60.0


GUIDELLM_V03 = (
    "pre-0.3-2025-06-12.yaml",
    "pre-0.3-2025-06-13.json",
    "pre-0.3-2025-06-26.json",
    "pre-0.3-2025-07-23.json",
    "pre-0.3-2025-07-23.yaml",
)


@pytest.mark.parametrize("name", GUIDELLM_V03)
def test_guidellm_02_03_reports_without_metadata_are_read_and_flagged_as_a_sample(
    name: str,
) -> None:
    path = CORPUS / "guidellm" / name
    raw = _raw(path)["benchmarks"][0]
    baseline = load_baseline(path)
    assert baseline.tool == "guidellm" and "0.2/0.3" in baseline.format
    assert baseline.format.endswith(f"({path.suffix[1:]})")
    (case,) = baseline.cases
    assert raw["args"]["strategy"] == {"type_": "synchronous"}
    assert (case.label, case.model, case.requests) == ("c=1", "example_model", 46)
    metrics = raw["metrics"]
    own = _own(metrics["time_to_first_token_ms"]["successful"], "ttft_ms")
    own |= _own(metrics["inter_token_latency_ms"]["successful"], "tpot_ms")
    own |= _own(metrics["request_latency"]["successful"], "request_latency_ms", 1000.0)
    own["output_throughput"] = metrics["output_tokens_per_second"]["successful"]["mean"]
    for metric, value in own.items():
        assert case.metrics[metric] == pytest.approx(value, rel=1e-12), metric
    # One request kept of the 46 its figures count: a sample, judged by its figures alone.
    assert len(raw["requests"]["successful"]) == 1 and case.samples is None
    assert any("keeps 1 of the 46 requests" in n for n in case.notes)


def test_guidellm_081_made_here_keeps_every_request_and_its_own_figures() -> None:
    path = FIXTURES / "guidellm-0.8.1-sweep-c1-c2.json"
    baseline = load_baseline(path)
    assert (baseline.tool, baseline.version) == ("guidellm", "0.8.1")
    assert [c.label for c in baseline.cases] == ["c=1", "c=2"]
    for case, raw in zip(baseline.cases, _raw(path)["benchmarks"], strict=True):
        assert (case.model, case.requests) == ("sim", 8)
        assert not any("a sample" in n or "measurement window:" in n for n in case.notes)
        assert case.samples is not None and case.samples[0]["ttft_ms"].size == 8
        ttft = raw["metrics"]["time_to_first_token_ms"]["successful"]["percentiles"]
        assert case.metrics["p90_ttft_ms"] == ttft["p90"]
        own = raw["metrics"]["output_tokens_per_second"]["successful"]["mean"]
        assert case.metrics["output_throughput"] == own
        assert "goodput" not in case.metrics and any("goodput" in u for u in case.unmapped)


# --- vLLM --------------------------------------------------------------------------------

VLLM_NIGHTLY = {
    "nightly-2025-02-17-sharegpt-qps1.json": "1/s",
    "nightly-2025-02-17-sharegpt-qps4.json": "4/s",
    "nightly-2025-02-17-sharegpt-qps16.json": "16/s",
    "nightly-2025-02-17-sharegpt-qpsinf.json": "unbounded",
    "nightly-2025-02-18-qps4.json": "4/s",
    "nightly-2025-02-18-qpsinf.json": "unbounded",
    "nightly-2025-02-27-qps1.json": "1/s",
    "nightly-2025-02-27-qps16.json": "16/s",
}


def _vllm_own(raw: dict[str, Any]) -> dict[str, float]:
    ours = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "request_latency_ms"}
    out = {}
    for key, value in raw.items():
        stat, _, rest = key.partition("_")
        metric = rest.removesuffix("_ms")
        if rest.endswith("_ms") and metric in ours and stat in STATS:
            out[f"{STATS[stat]}_{ours[metric]}"] = value
    for theirs, mine in (
        ("output_throughput", "output_throughput"),
        ("request_throughput", "request_throughput"),
        ("total_token_throughput", "total_token_throughput"),
        ("request_goodput", "goodput"),
    ):
        if raw.get(theirs) is not None:
            out[mine] = raw[theirs]
    return out


@pytest.mark.parametrize("name", sorted(VLLM_NIGHTLY))
def test_trimmed_vllm_nightly_files_give_what_they_hold(name: str) -> None:
    path = CORPUS / "vllm" / name
    raw = _raw(path)
    baseline = load_baseline(path)
    (case,) = baseline.cases
    assert baseline.tool == "vllm bench serve" and peer_kind(path) == "vllm"
    assert case.label == VLLM_NIGHTLY[name]
    assert case.model == raw["model_id"] and case.model.endswith("Meta-Llama-3-8B-Instruct")
    assert case.requests == 200 and any(
        "no completed count; 200 were sent" in n for n in case.notes
    )
    assert case.metrics == _vllm_own(raw)
    assert set(case.metrics) == {
        f"{s}_{c}" for s in ("mean", "p50", "p99") for c in ("ttft_ms", "tpot_ms")
    }  # trimmed: no E2E, no p90, no throughput; those are "not comparable" by name
    assert case.samples is None and any(u.startswith("itl") for u in case.unmapped)


@pytest.mark.parametrize("name", ["vllm-0.33.0-c1.json", "vllm-0.33.0-c2-detailed.json"])
def test_vllm_033_made_here(name: str) -> None:
    path = FIXTURES / name
    raw = _raw(path)
    (case,) = load_baseline(path).cases
    assert (case.label, case.model, case.requests) == (f"c={raw['max_concurrency']}", "sim", 8)
    assert case.metrics == _vllm_own(raw)
    if "detailed" in name:
        assert case.samples is not None
        (values,) = case.samples
        # Our per-request TPOT, (E2E - TTFT) / (tokens - 1), is vLLM's own: same median.
        assert float(np.median(values["tpot_ms"])) == pytest.approx(raw["median_tpot_ms"])
        assert float(np.percentile(values["ttft_ms"], 99)) == pytest.approx(raw["p99_ttft_ms"])
    else:
        assert case.samples is None


def test_vllm_files_older_than_e2el_give_their_latency_keys(tmp_path: Path) -> None:
    raw = _raw(CORPUS / "vllm" / "nightly-2025-02-27-qps1.json")
    raw |= {"mean_latency_ms": 9000.5, "median_latency_ms": 8800.25, "p99_latency_ms": 15000.0}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(raw))
    (case,) = load_baseline(path).cases
    assert case.metrics["mean_request_latency_ms"] == 9000.5
    assert case.metrics["p50_request_latency_ms"] == 8800.25
    assert case.metrics["p99_request_latency_ms"] == 15000.0
    raw |= {"mean_e2el_ms": 1.5}  # a newer file: e2el wins, latency_ms is something else
    path.write_text(json.dumps(raw))
    (case,) = load_baseline(path).cases
    assert case.metrics["mean_request_latency_ms"] == 1.5
    assert "p99_request_latency_ms" not in case.metrics


def test_vllm_sweep_summary_runs_at_one_load_are_its_trials(tmp_path: Path) -> None:
    """``vllm bench sweep`` writes run=N.json (a result plus run_number and the overrides)
    and summary.json, the list of them."""
    base = _raw(FIXTURES / "vllm-0.33.0-c2-detailed.json")
    runs = []
    for number, scale in enumerate((1.0, 1.1)):
        run = dict(base, run_number=number, max_concurrency=2)
        run["output_throughput"] = base["output_throughput"] * scale
        runs.append(run)
    (tmp_path / "run=0.json").write_text(json.dumps(runs[0]))
    (tmp_path / "summary.json").write_text(json.dumps(runs))
    single = load_baseline(tmp_path / "run=0.json")
    assert "sweep run" in single.format and single.cases[0].label == "c=2"
    summary = load_baseline(tmp_path / "summary.json")
    (case,) = summary.cases
    assert "summary.json" in summary.format and len(case.runs) == 2
    assert case.metrics["output_throughput"] == pytest.approx(base["output_throughput"] * 1.05)
    assert case.samples is not None and len(case.samples) == 2
    assert any("2 runs of this load" in n for n in case.notes)


# --- SGLang ------------------------------------------------------------------------------

SGLANG = {
    "deepseek_dp_mla_output.jsonl": ["unbounded"],
    "llama_3_3_70b_offline_output.jsonl": ["unbounded"] * 7,
    "llama_3_3_70b_online_output.jsonl": ["1/s", "2/s", "4/s", "8/s", "16/s", "4/s", "8/s"],
    "llama_405b_online_output.jsonl": ["1/s", "2/s", "4/s", "8/s", "4/s", "8/s"],
}


@pytest.mark.parametrize("name", sorted(SGLANG))
def test_sglang_jsonl_is_one_run_per_line(name: str) -> None:
    path = CORPUS / "sglang" / name
    lines = _raw(path)
    baseline = load_baseline(path)
    assert baseline.tool == "sglang bench_serving" and "JSON Lines" not in baseline.format
    assert [c.label for c in baseline.cases] == SGLANG[name]
    for number, (case, raw) in enumerate(zip(baseline.cases, lines, strict=True), start=1):
        assert case.requests == raw["completed"]
        assert case.metrics == {
            "mean_request_latency_ms": raw["mean_e2e_latency_ms"],
            "p50_request_latency_ms": raw["median_e2e_latency_ms"],
            "p50_ttft_ms": raw["median_ttft_ms"],
            "output_throughput": raw["output_throughput"],
        }
        assert case.notes[0].startswith(f"line {number}: {raw['dataset_name']} prompts, ")
        # These lines name no model: the model check the docs promise cannot be made.
        assert case.model is None
        assert refusals(case) == [
            "the file names no model, so the served model cannot be checked against ours"
        ]


# --- AIPerf ------------------------------------------------------------------------------


def test_aiperf_exports_are_read_with_their_model_and_load(tmp_path: Path) -> None:
    export = {
        "aiperf_version": "0.13.0",
        "input_config": {
            "models": {"items": [{"name": "sim"}]},
            "phases": [
                {
                    "name": "profiling",
                    "kind": "profiling",
                    "type": "concurrency",
                    "requests": 48,
                    "concurrency": 4,
                }
            ],
        },
        "time_to_first_token": {
            "unit": "ms",
            "avg": 60.7,
            "p50": 60.5,
            "p90": 62.2,
            "p95": 63.1,
            "p99": 64.0,
            "count": 48,
        },
        "inter_token_latency": {
            "unit": "ms",
            "avg": 8.1,
            "p50": 8.0,
            "p90": 8.4,
            "p95": 8.5,
            "p99": 8.9,
        },
        "request_latency": {
            "unit": "ms",
            "avg": 310.0,
            "p50": 305.0,
            "p90": 320.0,
            "p95": 330.0,
            "p99": 350.0,
        },
        "request_throughput": {"unit": "requests/sec", "avg": 7.14},
        "output_token_throughput": {"unit": "tokens/sec", "avg": 228.5},
        "request_count": {"unit": "requests", "avg": 48.0},
    }
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(export))
    baseline = load_baseline(path)
    assert (baseline.tool, baseline.version, peer_kind(path)) == ("aiperf", "0.13.0", "aiperf")
    (case,) = baseline.cases
    assert (case.label, case.model, case.requests) == ("c=4", "sim", 48)
    assert case.metrics["p99_ttft_ms"] == 64.0 and case.metrics["mean_tpot_ms"] == 8.1
    assert case.metrics["output_throughput"] == 228.5
    old = {
        **export,
        "input_config": {"endpoint": {"model_names": ["m"]}, "loadgen": {"request_rate": 5.0}},
    }
    path.write_text(json.dumps(old))
    (case,) = load_baseline(path).cases
    assert (case.label, case.model) == ("5/s", "m")


# --- refusals ----------------------------------------------------------------------------


def _case_of(path: Path) -> BaselineCase:
    (case,) = load_baseline(path).cases
    return case


def test_a_vllm_file_where_nothing_completed_is_refused_by_name(tmp_path: Path) -> None:
    raw = _raw(FIXTURES / "vllm-0.33.0-c1.json") | {"completed": 0, "failed": 8}
    raw |= {k: 0.0 for k in raw if k.endswith("_ms")}
    path = tmp_path / "all-failed.json"
    path.write_text(json.dumps(raw))
    assert "no completed requests (completed: 0): its figures describe nothing" in refusals(
        _case_of(path)
    )


def test_load_shapes_we_cannot_match_are_refused_by_name(tmp_path: Path) -> None:
    raw = _raw(FIXTURES / "vllm-0.33.0-c1.json") | {"request_rate": 4.0, "max_concurrency": 2}
    path = tmp_path / "capped.json"
    path.write_text(json.dumps(raw))
    case = _case_of(path)
    assert case.label == "4/s capped at c=2"
    assert "none of our load shapes" in refusals(case)[0]
    guide = _raw(FIXTURES / "guidellm-0.8.1-sweep-c1-c2.json")
    guide["benchmarks"] = guide["benchmarks"][:1]
    guide["benchmarks"][0]["config"]["strategy"] = {"type_": "constant", "rate": 2.0}
    path = tmp_path / "constant.json"
    path.write_text(json.dumps(guide))
    case = _case_of(path)
    assert case.label == "constant 2/s"
    assert "evenly spaced" in refusals(case)[0]


def test_a_file_without_a_model_is_refused_by_name(tmp_path: Path) -> None:
    raw = _raw(FIXTURES / "vllm-0.33.0-c1.json")
    del raw["model_id"]
    path = tmp_path / "anonymous.json"
    path.write_text(json.dumps(raw))
    assert refusals(_case_of(path)) == [
        "the file names no model, so the served model cannot be checked against ours"
    ]


def test_unrecognised_files_are_told_the_formats_we_read(tmp_path: Path) -> None:
    for name, text in (
        ("hello.json", '{"hello": 1}'),
        ("list.json", "[1, 2]"),
        ("notes.yaml", "a: b\n"),
        ("lines.jsonl", '{"a": 1}\n{"b": 2}\n'),
    ):
        path = tmp_path / name
        path.write_text(text)
        assert peer_kind(path) is None
        with pytest.raises(BaselineError) as caught:
            load_baseline(path)
        message = str(caught.value)
        assert message.startswith(f"{path}: not a result file of a tool we read")
        assert all(f in message for f in FORMATS) and "\n" not in message
        with pytest.raises(BaselineError, match="not a result file of a tool we read"):
            foreign_file(path)
    ours = tmp_path / "result.json"
    ours.write_text('{"schema_version": 1, "status": "succeeded"}')
    foreign_file(ours)  # ours: left to our own reader


def test_every_corpus_file_is_recognised_by_content() -> None:
    files = sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name != "README.md")
    assert len(files) >= 20
    for path in files:
        assert peer_kind(path) in ("guidellm", "vllm", "sglang"), path

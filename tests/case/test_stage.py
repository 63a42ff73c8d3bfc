"""run_case end to end: real AIPerf against the simulated server, checked against its ground truth.

AIPerf costs seconds per run, so each module-scoped case below runs once and several
tests read it. All cases share one population's bytes and entry count so that AIPerf's
content-addressed dataset cache serves every run after the first.
"""

from __future__ import annotations

import hashlib
import io
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from inferlab_bench.case.local import bookkeeping_for
from inferlab_bench.case.records import read_records
from inferlab_bench.case.stage import CaseOptions, run_case
from inferlab_bench.case.usage import autogroup_of
from inferlab_bench.protocol import BenchClientRequest, BenchClientResult, ClientStatus
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR, make_request, write_population

pytestmark = pytest.mark.slow

# Short and long answers: a 300 ms latency SLO splits them cleanly.
OUTPUT_LENGTHS = [4, 24, 4, 24, 24, 4, 24, 4, 4, 24, 4, 24]
WARMUP, REQUESTS = 2, 6
LATENCY = LatencyConfig(
    prefill_base_ms=60.0, prefill_ms_per_token=0.1, decode_base_ms=12.0, decode_ms_per_seq=0.5
)
MIDDLE_SLO_MS = 200.0
RANDOM = {"kind": "random", "input_tokens": 48, "output_tokens": 6}


@dataclass(frozen=True)
class Ran:
    request: BenchClientRequest
    result: BenchClientResult
    truth: list[dict[str, Any]]
    resets_before: int
    resets_after: int

    def requests_of(self, phase: str) -> list[dict[str, Any]]:
        """Ground-truth entries of this case's records of ``phase`` (joined on X-Request-ID)."""
        records = read_records(self.request.artifact_dir / "aiperf" / "profile.jsonl")
        ids = set(getattr(records, phase).x_request_id)
        return [e for e in self.truth if e["kind"] == "request" and e["x_request_id"] in ids]

    def resets(self) -> list[dict[str, Any]]:
        return [e for e in self.truth if e["kind"] == "reset"]


@pytest.fixture(scope="module")
def population(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return write_population(
        tmp_path_factory.mktemp("pop") / "population.jsonl", OUTPUT_LENGTHS[: WARMUP + REQUESTS]
    )


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    config = SimulatorConfig(
        model="sim-model",
        tokenizer=TOKENIZER_DIR,
        reset_endpoints=("vllm", "sglang"),
        latency=LATENCY,
    )
    with running_simulator(config) as running:
        yield running


def run(sim: Any, tmp: Path, reset: str | None = None, **kwargs: Any) -> Ran:
    request = make_request(port=sim.port, artifact_dir=tmp, **kwargs)
    before = sim.reset_count
    seen = len(sim.ground_truth())
    result = run_case(request, CaseOptions(prefix_cache_reset=reset, echo=io.StringIO()))
    return Ran(request, result, sim.ground_truth()[seen:], before, sim.reset_count)


@pytest.fixture(scope="module")
def warm_vllm(
    sim: Any, population: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Ran:
    """Concurrency 2, warmup, reset through vllm's path, a middle SLO."""
    slo = {"request_latency_ms": MIDDLE_SLO_MS, "minimum_good_request_ratio": 0.1}
    return run(
        sim,
        tmp_path_factory.mktemp("vllm"),
        reset="vllm",
        population=population,
        request_count=REQUESTS,
        warmup=WARMUP,
        reset_prefix_cache=True,
        slo=slo,
    )


@pytest.fixture(scope="module")
def warm_sglang(
    sim: Any, population: dict[str, Any], warm_vllm: Ran, tmp_path_factory: pytest.TempPathFactory
) -> Ran:
    """The same population again, right after ``warm_vllm``: reset through sglang's path."""
    return run(
        sim,
        tmp_path_factory.mktemp("sglang"),
        reset="sglang",
        population=population,
        request_count=REQUESTS,
        warmup=WARMUP,
        reset_prefix_cache=True,
    )


def assert_valid(result: BenchClientResult, check_v6: Any) -> None:
    assert result.status is ClientStatus.SUCCEEDED, result.error
    check_v6("BenchClientResult", orjson.loads(result.model_dump_json()))


def test_warmup_case_succeeds_and_counts_only_profiling(warm_vllm: Ran, check_v6: Any) -> None:
    result = warm_vllm.result
    assert_valid(result, check_v6)
    assert result.completed_requests == REQUESTS and result.failed_requests == 0
    summary = orjson.loads(
        (warm_vllm.request.artifact_dir / "aiperf" / "profile.json").read_bytes()
    )
    assert summary["request_latency"]["count"] == REQUESTS  # warmup is not in the metrics
    assert (
        result.native_command[1:4] == ["-m", "aiperf", "profile"] and result.native_exit_code == 0
    )
    kinds = {a.kind for a in result.raw_artifacts}
    assert {
        "config",
        "request_body",
        "summary",
        "records",
        "raw_records",
        "inputs",
        "log",
        "reset_evidence",
    } <= kinds
    assert all(a.path.exists() for a in result.raw_artifacts)


def test_validity_document_holds_every_verdict(warm_vllm: Ran, population: dict[str, Any]) -> None:
    doc = orjson.loads((warm_vllm.request.artifact_dir / "validity.json").read_bytes())
    assert "validity" in {a.name for a in warm_vllm.result.raw_artifacts}
    assert doc["schema_name"] == "inferlab-validity-v1"
    # The evidence next to the population gives the input tokens the server must report.
    assert doc["verdicts"]["prompt_tokens_reconciled"] == "pass"
    assert doc["prompt_tokens"]["compared"] == REQUESTS
    assert doc["verdicts"]["output_lengths_honored"] == "pass"
    assert doc["verdicts"]["cache_cold"] == "pass"
    assert doc["verdicts"]["load_generator_kept_up"] != "fail"
    # AIPerf's credit issue times are read: the dispatch delay is measured, not unknown.
    assert doc["dispatch"]["dispatch_delay_ms"]["p50"] >= 0.0
    # AIPerf's HTTP trace gives the client's own send time, part of every latency it reports.
    assert doc["dispatch"]["client_send_ms"]["mean"] > 0.0
    assert "client_send_share_of_ttft" not in doc["dispatch"]  # retired for client_cost_low
    # The client judged by its own cost, sampled from /proc while AIPerf ran.
    cost = doc["client_cost"]
    assert doc["verdicts"]["client_cost_low"] == cost["client_cost_low"]
    assert cost["cpu_ms_per_request"] > 0.0 and cost["host_cores"] >= 1
    assert cost["server_on_this_host"] is True  # the simulator answers on 127.0.0.1
    assert cost["send_delay_ms"]["p50"] >= 0.0
    # AIPerf names the worker of each request, so the send is judged net of its queue.
    assert 0.0 <= cost["send_time_ms"]["p50"] <= cost["send_delay_ms"]["p95"]
    # Against our simulator its truth decided the verdict; the proxies are kept as figures.
    assert [check["name"] for check in cost["checks"]] == ["client_added_latency_ms"]
    proxies = {check["name"]: check["verdict"] for check in doc["measured"]["proxy_checks"]}
    # Pooled, so the start is the first byte written: the send lies before TTFT's clock.
    assert proxies["client_send_in_ttft_p90_ms"] == "not_applicable"
    assert doc["measured"]["requests"] == REQUESTS
    # From the client's first byte written: the simulator's wait to parse is its own.
    assert doc["measured"]["measured_from"] == "client_start"
    assert "share this machine" in cost["in_words"]
    usage = orjson.loads((warm_vllm.request.artifact_dir / "client-usage.json").read_bytes())
    assert len(usage["time_ns"]) == len(usage["cpu_seconds"]) >= 2 and usage["processes"] > 2
    assert "record_processor" in usage["niced"]["services"]  # off the timing path
    # ... with every thread of each: ZeroMQ's I/O thread besides the main one at least.
    assert usage["niced"]["threads"] > len(usage["niced"]["services"])
    # From the cores, the load and the other tasks wanting a core when AIPerf started.
    runnable = usage["niced"]["host_runnable_before"]
    assert isinstance(runnable, int) and runnable >= 0
    assert usage["niced"]["policy"] == bookkeeping_for(warm_vllm.request, runnable)
    # AIPerf ran in our session, so in the simulator's scheduler autogroup: its lowered
    # bookkeeping yields to that server, not only to AIPerf's own sender.
    assert usage["schema_version"] == 4
    assert usage["autogroup"]["aiperf"] == usage["autogroup"]["caller"] == autogroup_of("self")
    # Our transport opened the pool's connections before the load: no request connects.
    chosen = orjson.loads((warm_vllm.request.artifact_dir / "connections.json").read_bytes())
    assert "INFERLAB_PRECONNECT" in chosen["aiperf_environment"]
    log = (warm_vllm.request.artifact_dir / "aiperf-output.log").read_text()
    assert "inferlab: 2 of 2 connections opened before load" in log
    lines = (warm_vllm.request.artifact_dir / "aiperf" / "profile.jsonl").read_bytes().split()
    reused = [orjson.loads(x)["metrics"]["http_req_connection_reused"]["value"] for x in lines]
    assert reused and set(reused) == {1}  # warmup's first requests included
    assert doc["population_sha256"] == population["sha256"]
    profiling = next(s for s in doc["sequences"] if s["phase"] == "profiling")
    sent = [f"inferlab-{i:08d}\n" for i in range(WARMUP, WARMUP + REQUESTS)]
    assert profiling["set_sha256"] == hashlib.sha256("".join(sent).encode()).hexdigest()


def test_aiperf_waits_for_credits_instead_of_spinning(warm_vllm: Ran) -> None:
    """Our reset strategy (profiling), named in the config: a spinning loop passes thousands
    of times per request, a waiting one a few times. The warmup keeps AIPerf's own strategy
    (AIPerf 0.13 runs every warmup with its built-in request_rate)."""
    log = (warm_vllm.request.artifact_dir / "aiperf-output.log").read_text()
    found = re.findall(r"inferlab: (\w+) issuing loop: (\d+) passes, (\d+) waits", log)
    phases = {phase.lower().split(".")[-1]: (int(p), int(w)) for phase, p, w in found}
    assert set(phases) == {"profiling"}, log[-2000:]
    passes, waits = phases["profiling"]
    assert waits >= 1 and passes <= 4 * REQUESTS + 4


def test_each_request_starts_at_its_first_byte_written(warm_vllm: Ran) -> None:
    """Our transport moves AIPerf's start stamp to the socket write: a TTFT is then the wait
    after the write (AIPerf's http_req_waiting) plus parsing, shorter than the wait plus
    aiohttp's own send work (http_req_sending), which AIPerf's stamp always includes."""
    chosen = orjson.loads((warm_vllm.request.artifact_dir / "connections.json").read_bytes())
    assert chosen["aiperf_environment"]["INFERLAB_WIRE_START"] == "1"
    log = (warm_vllm.request.artifact_dir / "aiperf-output.log").read_text()
    found = re.findall(r"inferlab: start at the first byte written for (\d+) of (\d+)", log)
    assert found and all(a == b for a, b in found), log[-2000:]
    assert sum(int(a) for a, _ in found) == WARMUP + REQUESTS
    lines = (warm_vllm.request.artifact_dir / "aiperf" / "profile.jsonl").read_bytes().split()
    metrics = [orjson.loads(x)["metrics"] for x in lines]
    inside = [
        m["time_to_first_token"]["value"] - m["http_req_waiting"]["value"]
        < m["http_req_sending"]["value"]
        for m in metrics
    ]
    assert len(inside) == REQUESTS + WARMUP and sum(inside) > len(inside) / 2


def test_measured_latencies_match_ground_truth(warm_vllm: Ran) -> None:
    truth = warm_vllm.requests_of("profiling")
    assert len(truth) == REQUESTS
    ttft = statistics.median((e["first_token_ns"] - e["arrival_ns"]) / 1e6 for e in truth)
    e2e = statistics.median((e["end_ns"] - e["arrival_ns"]) / 1e6 for e in truth)
    metrics = warm_vllm.result.metrics
    assert metrics["p50_ttft_ms"] == pytest.approx(ttft, rel=0.05)
    assert metrics["p50_request_latency_ms"] == pytest.approx(e2e, rel=0.05)


def test_output_tokens_equal_the_population_lengths(warm_vllm: Ran) -> None:
    truth = warm_vllm.requests_of("profiling")
    expected = OUTPUT_LENGTHS[WARMUP : WARMUP + REQUESTS]
    assert sorted(e["completion_tokens"] for e in truth) == sorted(expected)
    records = read_records(warm_vllm.request.artifact_dir / "aiperf" / "profile.jsonl").profiling
    by_id = dict(
        zip(records.conversation_id, records.metric("output_sequence_length"), strict=True)
    )
    assert [by_id[f"inferlab-{i:08d}"] for i in range(WARMUP, WARMUP + REQUESTS)] == expected


def test_middle_slo_matches_the_ground_truth_good_count(warm_vllm: Ran) -> None:
    truth = warm_vllm.requests_of("profiling")
    good = sum((e["end_ns"] - e["arrival_ns"]) / 1e6 <= MIDDLE_SLO_MS for e in truth)
    slo = warm_vllm.result.request_slo
    assert slo is not None and 0 < good < REQUESTS
    assert slo.good_requests == good and slo.good_request_ratio == good / REQUESTS
    assert slo.request_count_reconciled and slo.native_aggregate_good_request_count_consistent
    assert warm_vllm.result.metrics["good_request_ratio"] == good / REQUESTS


def test_reset_runs_once_between_warmup_and_profiling(warm_vllm: Ran, warm_sglang: Ran) -> None:
    for ran, path in ((warm_vllm, "/reset_prefix_cache"), (warm_sglang, "/flush_cache")):
        assert ran.resets_after - ran.resets_before == 1
        (reset,) = ran.resets()
        assert reset["path"] == path
        last_warmup_end = max(e["end_ns"] for e in ran.requests_of("warmup"))
        first_profiling = min(e["arrival_ns"] for e in ran.requests_of("profiling"))
        assert last_warmup_end < reset["time_ns"] < first_profiling


def test_second_case_on_the_same_population_starts_cold(warm_sglang: Ran, check_v6: Any) -> None:
    assert_valid(warm_sglang.result, check_v6)
    truth = sorted(warm_sglang.requests_of("profiling"), key=lambda e: e["arrival_ns"])
    assert truth[0]["cached_tokens"] == 0
    document = orjson.loads((warm_sglang.request.artifact_dir / "validity.json").read_bytes())
    verdict = document["cache"]["cold_start"]
    assert verdict["cold"] and verdict["first_request_cached_tokens"] == 0
    # The whole first wave was judged against its prompts' shared prefixes (chat template).
    concurrency = warm_sglang.request.case.load_shape.concurrency  # type: ignore[union-attr]
    assert verdict["checked_requests"] == min(concurrency, REQUESTS)
    assert verdict["shared_prefix_bound"] is not None and verdict["exceeding_requests"] == 0


def test_prompt_cache_read_ratio_is_reported(warm_vllm: Ran) -> None:
    ratio = warm_vllm.result.metrics["prompt_cache_read_ratio"]
    truth = warm_vllm.requests_of("profiling")
    expected = sum(e["cached_tokens"] for e in truth) / sum(e["prompt_tokens"] for e in truth)
    assert 0.0 <= ratio <= 1.0 and ratio == pytest.approx(expected, abs=1e-6)


def test_server_metrics_agree_with_our_records_over_the_profiling_phase(warm_vllm: Ran) -> None:
    [path] = [a.path for a in warm_vllm.result.raw_artifacts if a.name == "server-metrics"]
    metrics = orjson.loads(path.read_bytes())
    # The simulator serves vLLM's counters; the window is the profiling phase alone (the
    # plugin scraped at the reset), so every figure equals our sums over its records.
    assert metrics["served"] is True and metrics["family"] == "vllm"
    assert metrics["window"] == "profiling"
    figures = metrics["figures"]
    assert set(figures) == {"prompt_tokens", "output_tokens", "cached_prompt_tokens", "requests"}
    for name, figure in figures.items():
        assert figure["difference"] == 0, (name, figure)
    truth = warm_vllm.requests_of("profiling")
    assert figures["requests"]["server"] == len(truth) == REQUESTS
    # The server's means are the truth's (stamped before each write), so what AIPerf adds
    # on top can only be positive.
    latencies = metrics["latencies"]
    assert set(latencies) == {"ttft_ms", "request_latency_ms"}
    ttft = statistics.mean(e["ttft_ns"] / 1e6 for e in truth)
    assert latencies["ttft_ms"]["server_mean"] == pytest.approx(ttft, rel=1e-9)
    assert all(v["client_added"] >= 0 and v["server_count"] == REQUESTS for v in latencies.values())


@pytest.mark.parametrize(
    ("shape", "slo_ms", "ratio"),
    [
        ({"kind": "request_rate_limited", "request_rate": 20.0, "burstiness": None}, 60_000.0, 1.0),
        ({"kind": "request_rate_limited", "request_rate": 20.0, "burstiness": 0.5}, 0.001, 0.0),
        ({"kind": "unbounded_request_rate"}, None, None),
    ],
    ids=["poisson-loose-slo", "gamma-impossible-slo", "unbounded"],
)
def test_rate_and_unbounded_loads(
    sim: Any,
    population: dict[str, Any],
    tmp_path: Path,
    check_v6: Any,
    shape: dict[str, Any],
    slo_ms: float | None,
    ratio: float | None,
) -> None:
    slo = (
        None
        if slo_ms is None
        else {"request_latency_ms": slo_ms, "minimum_good_request_ratio": 0.5}
    )
    # WARMUP + REQUESTS profiling requests keep the dataset slice (and AIPerf's cache) the same;
    # the unbounded case uses AIPerf's synthetic prompts instead.
    source = {"population": population} if slo_ms is not None else {"source": RANDOM}
    ran = run(sim, tmp_path, load_shape=shape, request_count=WARMUP + REQUESTS, slo=slo, **source)
    assert_valid(ran.result, check_v6)
    assert ran.result.completed_requests == WARMUP + REQUESTS
    assert len(ran.requests_of("profiling")) == WARMUP + REQUESTS
    if ratio is None:
        assert ran.result.request_slo is None and "goodput" not in ran.result.metrics
        truth = ran.requests_of("profiling")
        assert {e["completion_tokens"] for e in truth} == {RANDOM["output_tokens"]}
        assert {e["prompt_tokens"] for e in truth} == {RANDOM["input_tokens"]}
        # Synthetic prompts: output counts are still checked against what was asked.
        doc = orjson.loads((ran.request.artifact_dir / "validity.json").read_bytes())
        assert doc["verdicts"]["output_lengths_honored"] == "pass"
        assert doc["output_tokens"]["compared"] == WARMUP + REQUESTS
        assert doc["verdicts"]["prompt_tokens_reconciled"] == "unknown"
    else:
        assert (
            ran.result.request_slo is not None and ran.result.metrics["good_request_ratio"] == ratio
        )

"""What the user sees when a case goes wrong: failed results with clear errors and the artifacts."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from inferlab_bench.case.stage import CaseOptions, run_case
from inferlab_bench.protocol import BenchClientResult, ClientStatus
from inferlab_bench.simulator import FaultConfig, LatencyConfig, SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR, make_request, write_population

pytestmark = pytest.mark.slow
LATENCY = LatencyConfig(prefill_base_ms=20.0, decode_base_ms=5.0)


@pytest.fixture(scope="module")
def population(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return write_population(tmp_path_factory.mktemp("pop") / "population.jsonl", [4, 5, 6, 7, 4, 5])


@pytest.fixture
def faulty(request: pytest.FixtureRequest) -> Iterator[Any]:
    config = SimulatorConfig(
        tokenizer=TOKENIZER_DIR, latency=LATENCY, faults=FaultConfig(**request.param)
    )
    with running_simulator(config) as sim:
        yield sim


def failed(result: BenchClientResult, check_v6: Any, match: str) -> None:
    assert result.status is ClientStatus.FAILED
    assert result.error is not None and match in result.error, result.error
    check_v6("BenchClientResult", orjson.loads(result.model_dump_json()))


def test_server_not_listening(population: dict[str, Any], tmp_path: Path, check_v6: Any) -> None:
    request = make_request(port=9, artifact_dir=tmp_path, population=population)
    result = run_case(request)
    failed(result, check_v6, "endpoint http://127.0.0.1:9: nothing is listening")
    assert result.native_command == []  # AIPerf never started


def test_server_not_listening_with_a_reset_to_detect(
    population: dict[str, Any], tmp_path: Path, check_v6: Any
) -> None:
    # Detecting the reset asks the server first; it said "framework is unknown" here.
    request = make_request(
        port=9, artifact_dir=tmp_path, population=population, reset_prefix_cache=True
    )
    result = run_case(request)
    failed(result, check_v6, "endpoint http://127.0.0.1:9: nothing is listening")
    assert result.native_command == []


def test_population_digest_is_verified_before_running(
    population: dict[str, Any], tmp_path: Path, check_v6: Any
) -> None:
    request = make_request(
        port=9, artifact_dir=tmp_path, population={**population, "sha256": "f" * 64}
    )
    failed(run_case(request), check_v6, "sha256 mismatch, expected ffff")
    short = make_request(port=9, artifact_dir=tmp_path, population=population, request_count=9)
    failed(run_case(short), check_v6, "6 entries, the case needs 9")


def test_reset_asked_but_impossible(
    population: dict[str, Any], tmp_path: Path, check_v6: Any
) -> None:
    with running_simulator(SimulatorConfig(reset_endpoints=("sglang",))) as sim:
        request = make_request(
            port=sim.port, artifact_dir=tmp_path, population=population, reset_prefix_cache=True
        )
        failed(
            run_case(request, CaseOptions(prefix_cache_reset="none")),
            check_v6,
            "names a server without a prefix-cache reset",
        )
        # Detection trusts /v1/models (owned_by vllm):
        # POST /reset_prefix_cache -> 404, no profiling.
        result = run_case(request)
        failed(result, check_v6, "/reset_prefix_cache failed: HTTP 404")
        assert result.native_command == [] and not [
            e for e in sim.ground_truth() if e["kind"] == "request"
        ]
        assert [a.kind for a in result.raw_artifacts if a.kind == "reset_evidence"] == [
            "reset_evidence"
        ]


def test_warmup_against_a_failing_server_fails_the_case(
    population: dict[str, Any], tmp_path: Path, check_v6: Any
) -> None:
    config = SimulatorConfig(
        tokenizer=TOKENIZER_DIR, latency=LATENCY, faults=FaultConfig(error_rate=1.0)
    )
    with running_simulator(config) as sim:
        warm = make_request(
            port=sim.port,
            artifact_dir=tmp_path / "warm",
            population=population,
            request_count=2,
            warmup=2,
        )
        failed(
            run_case(warm, CaseOptions(echo=io.StringIO())),
            check_v6,
            "warmup: 2 of 2 requests failed",
        )
        # Without warmup, every request failing is a measurement: goodput 0, not a crash.
        cold = make_request(
            port=sim.port,
            artifact_dir=tmp_path / "cold",
            population=population,
            request_count=4,
            slo={"ttft_ms": 1000.0, "minimum_good_request_ratio": 0.5},
        )
        result = run_case(cold, CaseOptions(echo=io.StringIO()))
    assert result.status is ClientStatus.SUCCEEDED, result.error
    check_v6("BenchClientResult", orjson.loads(result.model_dump_json()))
    assert result.completed_requests == 0 and result.failed_requests == 4
    assert result.metrics["goodput"] == 0.0 and result.metrics["request_throughput"] == 0.0
    assert "p50_ttft_ms" not in result.metrics


@pytest.mark.parametrize("faulty", [{"stall_rate": 1.0, "stall_seconds": 120.0}], indirect=True)
def test_stall_past_the_budget(
    faulty: Any, population: dict[str, Any], tmp_path: Path, check_v6: Any
) -> None:
    request = make_request(
        port=faulty.port, artifact_dir=tmp_path, population=population, budget=12.0
    )
    started = time.monotonic()
    result = run_case(request, CaseOptions(echo=io.StringIO()))
    elapsed = time.monotonic() - started
    # The phase named is the one AIPerf's log reached: on a busy host its start-up alone can
    # outlast 12 s (17 to 85 s measured at load average 15 to 18), and then no request was sent.
    log = (tmp_path / "aiperf-output.log").read_text()
    phase = "running" if "-> profiling" in log else "still starting"
    failed(result, check_v6, f"case_budget_seconds 12 ran out while AIPerf was {phase}")
    assert elapsed < 12.0 + 2.0  # the budget is a hard deadline, AIPerf's shutdown included
    assert {"config", "log"} <= {a.kind for a in result.raw_artifacts}
    assert result.native_command and all(a.path.exists() for a in result.raw_artifacts)


@pytest.mark.parametrize("faulty", [{}], indirect=True)
def test_a_budget_spent_while_aiperf_starts_does_not_blame_the_server(
    faulty: Any, population: dict[str, Any], tmp_path: Path, check_v6: Any
) -> None:
    # 5 s leaves AIPerf about 1 s before its stop (3.5 s before the budget); it needs 14 s to
    # its first request on a quiet 2-core host, so it never sends one. The message says so,
    # instead of "the server may be stalling" (which it said for every deadline).
    request = make_request(
        port=faulty.port, artifact_dir=tmp_path, population=population, budget=5.0
    )
    started = time.monotonic()
    result = run_case(request, CaseOptions(echo=io.StringIO()))
    elapsed = time.monotonic() - started
    assert "-> profiling" not in (tmp_path / "aiperf-output.log").read_text()
    failed(result, check_v6, "case_budget_seconds 5 ran out while AIPerf was still starting")
    assert result.error is not None and "nothing reached the server" in result.error
    assert "stalling" not in result.error
    assert result.completed_requests == 0 and result.failed_requests == 0
    assert elapsed < 5.0 + 2.0  # the same hard deadline as a stall's


@pytest.mark.parametrize("faulty", [{"stall_rate": 1.0, "stall_seconds": 120.0}], indirect=True)
def test_sigterm_mid_run_through_the_cli(
    faulty: Any, population: dict[str, Any], tmp_path: Path, check_v6: Any
) -> None:
    request = make_request(port=faulty.port, artifact_dir=tmp_path / "case", population=population)
    (tmp_path / "request.json").write_text(request.model_dump_json())
    command = [
        sys.executable,
        "-m",
        "inferlab_bench",
        "case",
        "--input",
        str(tmp_path / "request.json"),
        "--output",
        str(tmp_path / "result.json"),
    ]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL, env={**os.environ})
    log = tmp_path / "case" / "aiperf" / "logs" / "aiperf.log"
    _wait_for(lambda: log.is_file() and "(profiling) started" in log.read_text(), timeout=60)
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    result = BenchClientResult.model_validate_json((tmp_path / "result.json").read_bytes())
    failed(result, check_v6, "case interrupted by a signal")
    assert result.native_command and any(a.kind == "config" for a in result.raw_artifacts)


def _wait_for(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def test_aiperf_failing_at_start_up_is_reported_in_its_own_words(
    population: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, check_v6: Any
) -> None:
    # Force-close without a zero keep-alive makes AIPerf 0.13 fail before warmup ends; the
    # error used to blame the reset ("never ran") and hide AIPerf's reason in its log.
    monkeypatch.setenv("AIPERF_HTTP_FORCE_CLOSE", "true")
    monkeypatch.setenv("AIPERF_SERVICE_START_TIMEOUT", "5")
    config = SimulatorConfig(tokenizer=TOKENIZER_DIR, latency=LATENCY)
    with running_simulator(config) as sim:
        request = make_request(
            port=sim.port,
            artifact_dir=tmp_path,
            population=population,
            request_count=2,
            warmup=2,
            reset_prefix_cache=True,
        )
        result = run_case(request, CaseOptions(prefix_cache_reset="vllm"))
    failed(result, check_v6, "AIPerf exited with code 1: ")
    assert "No workers registered" in (result.error or "")
    assert "never ran" not in (result.error or "") and "╰" not in (result.error or "")


def test_a_fifo_population_is_refused_without_opening_it(
    population: dict[str, Any], tmp_path: Path, check_v6: Any
) -> None:
    # A request built in-process (human run) skips JSON mode's on-disk checks: the stage
    # itself must not open a FIFO, which would block until the budget ran out.
    fifo = tmp_path / "population.jsonl"
    os.mkfifo(fifo)
    request = make_request(
        port=9, artifact_dir=tmp_path / "case", population={**population, "path": str(fifo)}
    )
    started = time.monotonic()
    failed(run_case(request), check_v6, f"population.path {fifo} is a FIFO")
    assert time.monotonic() - started < 5.0

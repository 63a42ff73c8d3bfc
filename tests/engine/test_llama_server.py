"""The case stage against llama.cpp's llama-server through real AIPerf: JSON and human runs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from inferlab_bench.case.records import read_records
from inferlab_bench.runs.demo import TOKENIZER_DIR
from tests.engine.conftest import StartServer
from tests.engine.proxy import late_closing_proxy
from tests.engine.server import RunningLlamaServer
from tests.engine.support import (
    OUTPUT_TOKENS,
    artifact,
    case_request,
    cli,
    long_population,
    run_json_case,
    short_population,
)

pytestmark = pytest.mark.slow


def test_json_case_at_concurrency_reconciles_and_loses_no_request(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(parallel=2)
    population = short_population(tmp_path / "population.jsonl", 12)
    started = time.monotonic()
    request = case_request(server, tmp_path / "c2", population, request_count=12)
    result = run_json_case(request)
    print(f"json case c=2, 12 requests: {time.monotonic() - started:.1f} s")
    assert result["status"] == "succeeded", result["error"]
    assert (result["completed_requests"], result["failed_requests"]) == (12, 0)
    connections = artifact(result, "connections")
    assert connections["policy"] == "close"
    assert connections["origin"] == "detected from GET /v1/models owned_by 'llamacpp'"
    assert connections["aiperf_environment"] == {
        "AIPERF_HTTP_FORCE_CLOSE": "true",
        "AIPERF_HTTP_KEEPALIVE_TIMEOUT": "0",
    }
    validity = artifact(result, "validity")
    assert validity["verdicts"]["requests_succeeded"] == "pass"
    # The server renders Qwen3's template byte for byte as the tokenizer does.
    assert validity["verdicts"]["prompt_tokens_reconciled"] == "pass", validity["prompt_tokens"]
    assert validity["prompt_tokens"]["compared"] == 12
    assert validity["verdicts"]["output_lengths_honored"] == "pass"
    # AIPerf names the worker of every request: its send time is net of its queue, which
    # can only take time away from the whole delay (figures).
    cost = validity["client_cost"]
    print(f"send time {cost['send_time_ms']}, whole delay {cost['send_delay_ms']}")
    assert 0.0 <= cost["send_time_ms"]["p95"] <= cost["send_delay_ms"]["p95"]
    # A connection per request: AIPerf's start comes before the connect, so the client's
    # send lies inside TTFT and is judged.
    [send] = [c for c in cost["checks"] if c["name"] == "client_send_in_ttft_p90_ms"]
    assert send["verdict"] in ("pass", "fail") and send["observed"] == cost["send_in_ttft_p90_ms"]
    # One connection per request here, and aiohttp's send span (request start -> body
    # written) holds its connect: the client's send time counts the connect once.
    [folder] = [Path(a["path"]).parent for a in result["raw_artifacts"] if a["name"] == "validity"]
    sent = read_records(folder / "aiperf" / "profile.jsonl").profiling
    connecting, sending = sent.metric("http_req_connecting"), sent.metric("http_req_sending")
    assert (connecting > 0).all() and (sending >= connecting).all(), (connecting, sending)
    assert validity["dispatch"]["client_send_ms"]["mean"] == pytest.approx(sending.mean())
    # The server's own counters over the run agree with our per-request sums.
    metrics = artifact(result, "server-metrics")
    assert metrics["served"] is True and metrics["family"] == "llamacpp"
    figures = metrics["figures"]
    assert set(figures) >= {"prompt_tokens", "output_tokens", "cached_prompt_tokens"}
    for name, figure in figures.items():
        assert figure["difference"] == 0, (name, figure)
    assert figures["output_tokens"]["ours"] == 12 * OUTPUT_TOKENS


def test_human_run_at_a_rate(start_server: StartServer, tmp_path: Path) -> None:
    server = start_server(parallel=2)
    out = tmp_path / "rate"
    started = time.monotonic()
    proc = cli(
        "run",
        "--url",
        server.base_url,
        "--model",
        server.model_id,
        "--tokenizer",
        TOKENIZER_DIR,
        "--random-input-tokens",
        "48",
        "--random-output-tokens",
        "8",
        "--rate",
        "4",
        "--requests",
        "10",
        "--out",
        str(out),
    )
    print(f"human run poisson 4/s, 10 requests: {time.monotonic() - started:.1f} s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert (result["completed_requests"], result["failed_requests"]) == (10, 0)
    assert "requests succeeded: pass. All 10 requests succeeded." in proc.stdout
    assert "prompt tokens reconciled: unknown" in proc.stdout  # synthetic prompts: no evidence
    assert "output lengths honored: pass" in proc.stdout
    # Not --strict: a fresh connection per request is part of every TTFT, and against a model
    # this small (TTFT of a few ms) the client's connect time exceeds 3% of it.


def test_a_bos_adding_model_is_named_a_constant_offset(
    start_server: StartServer, tiny_model_bos: Path, tmp_path: Path
) -> None:
    server = start_server(model=tiny_model_bos, parallel=1)
    population = long_population(tmp_path / "population.jsonl", 6)
    request = case_request(server, tmp_path / "bos", population, request_count=6)
    result = run_json_case(request)
    assert result["status"] == "succeeded", result["error"]
    tokens = artifact(result, "validity")["prompt_tokens"]
    assert tokens["verdict"] == "fail"
    assert tokens["constant_offset"] == 1
    assert min(e for e in _expected_inputs(population)) > 100  # 1% would have hidden it
    assert (
        "constant offset: the server counts +1 tokens on every one of 6"
        in (tokens["check"]["detail"])
    )


def _expected_inputs(population: dict[str, object]) -> list[int]:
    from inferlab_bench.layout import evidence_path

    path = evidence_path(Path(str(population["path"])))
    return [json.loads(line)["input_tokens"] for line in path.read_text().splitlines()]


@pytest.mark.parametrize(("connections", "failures"), [("pooled", True), ("auto", False)])
def test_pooled_connections_lose_requests_and_validity_says_so(
    start_server: StartServer, tmp_path: Path, connections: str, failures: bool
) -> None:
    """Without the fix a server closing after each response costs requests: never a pass."""
    server = start_server(parallel=2)
    population = short_population(tmp_path / "population.jsonl", 12)
    upstream = int(server.base_url.rsplit(":", 1)[1])
    with late_closing_proxy(upstream) as proxy:
        behind = RunningLlamaServer(proxy.base_url, server.model_path, server.log_path, server.args)
        request = case_request(behind, tmp_path / connections, population, request_count=12)
        result = run_json_case(request, "--connections", connections)
    assert result["status"] == "succeeded", result["error"]
    validity = artifact(result, "validity")
    if not failures:
        assert artifact(result, "connections")["policy"] == "close"
        assert result["failed_requests"] == 0
        assert validity["verdicts"]["requests_succeeded"] == "pass"
        return
    assert result["failed_requests"] > 0
    assert validity["verdict"] == "fail"
    assert validity["verdicts"]["requests_succeeded"] == "fail"
    [transport] = validity["failures"]["classes"]
    assert transport["error_class"] == "transport"
    assert transport["count"] == result["failed_requests"]
    assert "disconnected" in transport["example"].lower()

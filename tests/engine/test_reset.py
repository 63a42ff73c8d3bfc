"""--reset-prefix-cache llamacpp: every slot erased after warmup, the RAM prompt cache refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inferlab_bench.protocol import BenchClientRequest
from tests.engine.conftest import StartServer
from tests.engine.server import RunningLlamaServer
from tests.engine.support import (
    OUTPUT_TOKENS,
    artifact,
    case_request,
    repeating_population,
    run_json_case,
)

pytestmark = pytest.mark.slow
WARMUP, REQUESTS = 2, 4


def slot_actions(tmp_path: Path) -> tuple[str, ...]:
    """This llama-server answers POST /slots (erase too) only with a slot save path."""
    folder = tmp_path / "slots"
    folder.mkdir(exist_ok=True)
    return ("--slot-save-path", f"{folder}/")


def warm_reset_case(
    server: RunningLlamaServer, tmp_path: Path, name: str, body: dict[str, Any] | None = None
) -> BenchClientRequest:
    """A case whose warmup sends the prompts it then measures, with a reset between."""
    population = repeating_population(tmp_path / "population.jsonl", WARMUP + REQUESTS, WARMUP)
    return case_request(
        server,
        tmp_path / name,
        population,
        request_count=REQUESTS,
        warmup=WARMUP,
        reset_prefix_cache=True,
        body=body,
    )


def test_with_the_reset_the_first_measured_requests_read_no_cached_tokens(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(parallel=2, extra=slot_actions(tmp_path))
    request = warm_reset_case(server, tmp_path, "reset")
    result = run_json_case(request, "--prefix-cache-reset", "llamacpp")
    assert result["status"] == "succeeded", result["error"]
    evidence = artifact(result, "reset-evidence")
    assert evidence["when"] == "after-warmup"
    urls = [call["url"].removeprefix(server.base_url) for call in evidence["calls"]]
    assert urls == ["/slots", "/slots/0?action=erase", "/slots/1?action=erase"]
    assert artifact(result, "prompt-cache-probe")["ram_prompt_cache_on"] is False
    validity = artifact(result, "validity")
    verdict = validity["cache"]["cold_start"]
    assert verdict["cold"] is True and verdict["first_request_cached_tokens"] == 0, verdict
    assert validity["verdicts"]["cache_cold"] == "pass", validity["cache"]
    warmup, profiling = validity["cache"]["phases"]
    assert warmup["phase"] == "warmup" and profiling["phase"] == "profiling"
    # Our plugin read /metrics between warmup and profiling: the profiling phase alone.
    metrics = artifact(result, "server-metrics")
    assert metrics["window"] == "profiling"
    assert metrics["figures"]["output_tokens"]["ours"] == REQUESTS * OUTPUT_TOKENS
    for name, figure in metrics["figures"].items():
        assert figure["difference"] == 0, (name, figure)


def test_erasing_one_slot_of_two_leaves_the_cache_warm_and_the_case_says_so(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Every request pinned to slot 1 (llama.cpp's ``id_slot``); erasing slot 0 alone is caught.

    Unpinned, which slot a request lands on depends on timing (a free slot with a shared prefix
    is preferred, else the least recently used), so a test erasing one slot could find the
    prompts in the other one or in neither.
    """
    server = start_server(parallel=2, extra=slot_actions(tmp_path))
    request = warm_reset_case(server, tmp_path, "partial", body={"id_slot": 1})
    result = run_json_case(request, "--prefix-cache-reset", "POST:/slots/0?action=erase")
    assert result["status"] == "failed"
    assert "the prefix cache was not cold after the reset" in result["error"]
    assert artifact(result, "validity")["verdicts"]["cache_cold"] == "fail"


def test_a_ram_prompt_cache_refuses_a_cold_start_case(
    start_server: StartServer, tmp_path: Path
) -> None:
    # llama-server's default RAM prompt cache: 8192 MiB.
    server = start_server(parallel=2, cache_ram_mib=None, extra=slot_actions(tmp_path))
    request = warm_reset_case(server, tmp_path, "ram")
    result = run_json_case(request, "--prefix-cache-reset", "llamacpp")
    assert result["status"] == "failed"
    assert "RAM prompt cache" in result["error"]
    assert "--cache-ram 0" in result["error"]
    assert result["native_command"] == []  # refused before AIPerf ran
    assert artifact(result, "prompt-cache-probe")["ram_prompt_cache_on"] is True


def test_without_slot_actions_the_reset_names_the_flag(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(parallel=1)
    population = repeating_population(tmp_path / "population.jsonl", REQUESTS, REQUESTS)
    request = case_request(
        server, tmp_path / "no-slots", population, request_count=REQUESTS, reset_prefix_cache=True
    )
    result = run_json_case(request, "--prefix-cache-reset", "llamacpp")
    assert result["status"] == "failed"
    assert "/slots/0?action=erase failed: HTTP 501" in result["error"]
    assert "--slot-save-path" in result["error"]

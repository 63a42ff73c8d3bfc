"""The ground-truth log: complete JSONL lines on disk, the same records in memory."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.simulator.conftest import StartSimulator, chat_body

pytestmark = pytest.mark.timeout(30)


def test_file_and_memory_hold_the_same_complete_records(
    start_simulator: StartSimulator, client: httpx.Client, tmp_path: Path
) -> None:
    path = tmp_path / "gt" / "truth.jsonl"
    sim = start_simulator(ground_truth_path=path)
    headers = {"X-Request-ID": "req-1", "X-Correlation-ID": "conv-1"}
    client.post(
        f"{sim.base_url}/v1/chat/completions",
        headers=headers,
        json=chat_body("first", max_tokens=4, min_tokens=4, ignore_eos=True),
    )
    client.post(f"{sim.base_url}/reset_prefix_cache")
    client.post(
        f"{sim.base_url}/v1/chat/completions", json=chat_body("second", max_tokens=2, stream=False)
    )
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    on_disk = [json.loads(line) for line in raw.splitlines()]
    assert on_disk == sim.ground_truth()
    first, reset, second = on_disk
    assert (
        reset["kind"] == "reset"
        and reset["status"] == 200
        and reset["path"] == "/reset_prefix_cache"
    )
    assert first["kind"] == "request" and first["path"] == "/v1/chat/completions"
    assert (first["x_request_id"], first["x_correlation_id"], first["headers_request_id"]) == (
        "req-1",
        "conv-1",
        "req-1",
    )
    assert first["stream"] is True and second["stream"] is False
    assert (first["max_tokens"], first["min_tokens"], first["ignore_eos"]) == (4, 4, True)
    assert first["completion_tokens"] == 4 and first["status"] == 200 and first["fault"] is None
    assert (
        first["arrival_ns"] <= first["first_token_ns"] <= first["last_token_ns"] <= first["end_ns"]
    )
    assert first["arrival_ns"] < reset["time_ns"] < second["arrival_ns"]
    assert (
        len(first["prompt_sha256"]) == 64
        and first["first_user_sha256"] != second["first_user_sha256"]
    )


def test_a_second_server_appends(
    start_simulator: StartSimulator, client: httpx.Client, tmp_path: Path
) -> None:
    path = tmp_path / "truth.jsonl"
    for _ in range(2):
        sim = start_simulator(ground_truth_path=path)
        client.post(f"{sim.base_url}/flush_cache")
    assert len(path.read_text().splitlines()) == 2

"""Each injected fault, as a client sees it, and as the ground truth records it."""

from __future__ import annotations

import time

import httpx
import orjson
import pytest

from inferlab_bench.simulator import FaultConfig
from tests.simulator.conftest import StartSimulator, chat_body
from tests.simulator.sse import content, events, parsed

pytestmark = pytest.mark.timeout(30)


def _post(client: httpx.Client, base_url: str, **extra: object) -> httpx.Response:
    body = {**chat_body(max_tokens=6, min_tokens=6, ignore_eos=True), **extra}
    return client.post(f"{base_url}/v1/chat/completions", json=body)


@pytest.mark.parametrize("status", [500, 429])
def test_error_rate_returns_the_status(
    start_simulator: StartSimulator, client: httpx.Client, status: int
) -> None:
    sim = start_simulator(faults=FaultConfig(error_rate=1.0, error_status=status))
    r = _post(client, sim.base_url)
    assert r.status_code == status and r.json()["error"]["code"] == status
    record = sim.ground_truth()[-1]
    assert record["status"] == status and record["fault"] == f"error_{status}"
    assert record["first_token_ns"] is None and record["completion_tokens"] == 0


def test_partial_error_rate_is_seeded(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    def statuses(seed: int) -> list[int]:
        sim = start_simulator(seed=seed, faults=FaultConfig(error_rate=0.5))
        return [
            _post(client, sim.base_url, max_tokens=1, min_tokens=1).status_code for _ in range(16)
        ]

    first = statuses(7)
    assert first == statuses(7)
    assert 200 in first and 500 in first


def test_stall_delays_the_first_byte(start_simulator: StartSimulator, client: httpx.Client) -> None:
    sim = start_simulator(faults=FaultConfig(stall_rate=1.0, stall_seconds=0.5))
    t0 = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        client.post(
            f"{sim.base_url}/v1/chat/completions",
            json=chat_body(max_tokens=2),
            timeout=httpx.Timeout(5.0, read=0.2),
        )
    t1 = time.monotonic()
    assert _post(client, sim.base_url).status_code == 200
    assert time.monotonic() - t1 >= 0.5 > t1 - t0


def test_dropped_mid_stream_after_k_tokens(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator(faults=FaultConfig(drop_rate=1.0, drop_after_tokens=3))
    received: list[str] = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        client.stream(
            "POST",
            f"{sim.base_url}/v1/chat/completions",
            json=chat_body(max_tokens=6, ignore_eos=True),
        ) as r,
    ):
        for line in r.iter_lines():
            received.append(line)
    chunks, done = parsed("\n".join(received) + "\n\n")
    assert not done and len(content(chunks)) == 3
    record = sim.ground_truth()[-1]
    assert record["fault"] == "drop" and record["completion_tokens"] == 3


def test_dropped_non_streaming_body(start_simulator: StartSimulator, client: httpx.Client) -> None:
    sim = start_simulator(faults=FaultConfig(drop_rate=1.0))
    with pytest.raises(httpx.RemoteProtocolError):
        _post(client, sim.base_url, stream=False)


def test_malformed_chunk_is_invalid_json(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator(faults=FaultConfig(malformed_rate=1.0, malformed_after_tokens=2))
    payloads = events(_post(client, sim.base_url).text)
    broken = []
    for payload in payloads[:-1]:
        try:
            orjson.loads(payload)
        except orjson.JSONDecodeError:
            broken.append(payload)
    assert len(broken) == 1 and payloads[-1] == "[DONE]"
    assert sim.ground_truth()[-1]["fault"] == "malformed"


def test_prompt_tokens_offset(start_simulator: StartSimulator, client: httpx.Client) -> None:
    sim = start_simulator(faults=FaultConfig(prompt_tokens_offset=5))
    chunks, _ = parsed(_post(client, sim.base_url).text)
    record = sim.ground_truth()[-1]
    assert chunks[-1]["usage"]["prompt_tokens"] == record["prompt_tokens"] + 5
    assert record["reported_prompt_tokens"] == record["prompt_tokens"] + 5


def test_ignore_min_tokens_stops_early(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator(faults=FaultConfig(ignore_min_tokens=True))
    chunks, _ = parsed(_post(client, sim.base_url).text)
    assert len(content(chunks)) == 3 == chunks[-1]["usage"]["completion_tokens"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert sim.ground_truth()[-1]["fault"] == "ignore_min_tokens"

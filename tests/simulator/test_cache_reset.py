"""Prefix-cache hits over HTTP and the vLLM / SGLang reset endpoints."""

from __future__ import annotations

import httpx
import pytest

from tests.simulator.conftest import StartSimulator, chat_body
from tests.simulator.sse import parsed

pytestmark = pytest.mark.timeout(30)

LONG = "The quick brown fox jumps over the lazy dog. " * 20


def _cached(client: httpx.Client, base_url: str, text: str = LONG) -> int:
    body = chat_body(text, max_tokens=1, ignore_eos=True)
    chunks, _ = parsed(client.post(f"{base_url}/v1/chat/completions", json=body).text)
    details: int = chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"]
    return details


@pytest.mark.parametrize(
    ("endpoint", "path"), [("vllm", "/reset_prefix_cache"), ("sglang", "/flush_cache")]
)
def test_repeat_hits_and_reset_clears(
    start_simulator: StartSimulator, client: httpx.Client, endpoint: str, path: str
) -> None:
    sim = start_simulator(reset_endpoints=(endpoint,))
    assert _cached(client, sim.base_url) == 0
    hit = _cached(client, sim.base_url)
    assert hit > 0 and hit % 16 == 0
    assert client.post(f"{sim.base_url}{path}").status_code == 200
    assert sim.reset_count == 1
    assert _cached(client, sim.base_url) == 0
    other = "/flush_cache" if endpoint == "vllm" else "/reset_prefix_cache"
    assert client.post(f"{sim.base_url}{other}").status_code == 404
    assert sim.reset_count == 1
    resets = [r for r in sim.ground_truth() if r["kind"] == "reset"]
    assert len(resets) == 1 and resets[0]["path"] == path and resets[0]["cleared_blocks"] > 0


def test_no_reset_endpoints(start_simulator: StartSimulator, client: httpx.Client) -> None:
    sim = start_simulator(reset_endpoints=())
    assert client.post(f"{sim.base_url}/reset_prefix_cache").status_code == 404
    assert client.post(f"{sim.base_url}/flush_cache").status_code == 404


def test_shared_prefix_is_partly_cached(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator()
    _cached(client, sim.base_url, LONG + "first question")
    shared = _cached(client, sim.base_url, LONG + "a different ending entirely")
    assert 0 < shared <= len((LONG + "<|user|>\n").encode()) // 4


def test_capacity_evicts_least_recently_used(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator(cache_capacity_blocks=20)  # one LONG prompt is ~14 blocks
    _cached(client, sim.base_url, "A" + LONG)
    _cached(client, sim.base_url, "B" + LONG)  # evicts most of A
    assert _cached(client, sim.base_url, "A" + LONG) < 16 * 10


def test_reset_noop_answers_200_but_keeps_the_cache(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    from inferlab_bench.simulator import FaultConfig

    sim = start_simulator(faults=FaultConfig(reset_noop=True))
    _cached(client, sim.base_url)
    assert client.post(f"{sim.base_url}/reset_prefix_cache").status_code == 200
    assert _cached(client, sim.base_url) > 0
    reset = [r for r in sim.ground_truth() if r["kind"] == "reset"][0]
    assert reset["fault"] == "reset_noop" and reset["cleared_blocks"] == 0

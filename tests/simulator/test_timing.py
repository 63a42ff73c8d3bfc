"""Measured latencies follow the model: TTFT, ITL, queueing behind max_num_seqs."""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

import httpx
import pytest

from inferlab_bench.simulator import LatencyConfig
from tests.simulator.conftest import StartSimulator, chat_body

pytestmark = pytest.mark.timeout(60)


def _requests(base_url: str, count: int, tokens: int, tag: str) -> None:
    with httpx.Client(timeout=10) as client:
        for i in range(count):
            body = chat_body(f"{tag} {i} " + "x" * 400, max_tokens=tokens, ignore_eos=True)
            client.post(f"{base_url}/v1/chat/completions", json=body).raise_for_status()


async def _concurrently(base_url: str, count: int, tokens: int) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        bodies = [chat_body(f"c{i}", max_tokens=tokens, ignore_eos=True) for i in range(count)]
        url = f"{base_url}/v1/chat/completions"
        for r in await asyncio.gather(*(client.post(url, json=b) for b in bodies)):
            r.raise_for_status()


def _ms(record: dict[str, Any], a: str, b: str) -> float:
    return float(record[b] - record[a]) / 1e6


def test_ttft_and_itl_match_the_model(start_simulator: StartSimulator) -> None:
    lat = LatencyConfig(
        prefill_base_ms=5, prefill_ms_per_token=0.05, decode_base_ms=8, decode_ms_per_seq=0.2
    )
    sim = start_simulator(latency=lat)
    _requests(sim.base_url, 25, 5, "t")
    records = sim.ground_truth()
    expected_ttft = 5 + 0.05 * records[0]["prompt_tokens"]
    ttft = statistics.median(_ms(r, "arrival_ns", "first_token_ns") for r in records)
    itl = statistics.median(_ms(r, "first_token_ns", "last_token_ns") / 4 for r in records)
    assert ttft == pytest.approx(expected_ttft, rel=0.08)
    assert itl == pytest.approx(8.2, rel=0.05)


def test_requests_beyond_max_num_seqs_queue(start_simulator: StartSimulator) -> None:
    lat = LatencyConfig(
        prefill_base_ms=0,
        prefill_ms_per_token=0,
        decode_base_ms=20,
        decode_ms_per_seq=0,
        max_num_seqs=1,
    )
    sim = start_simulator(latency=lat)
    asyncio.run(_concurrently(sim.base_url, 2, 16))
    first, second = sorted(sim.ground_truth(), key=lambda r: r["first_token_ns"])
    # Both were in flight together (each takes 15 gaps of 20 ms), so the second
    # queued: admitted only when the first ended, its first token right after.
    assert second["arrival_ns"] < first["last_token_ns"]
    assert second["admitted_ns"] >= first["last_token_ns"]
    assert _ms(second, "arrival_ns", "admitted_ns") > 100
    assert _ms(second, "admitted_ns", "first_token_ns") < 20

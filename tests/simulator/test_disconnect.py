"""A client that goes away mid-stream frees its slot and is logged with status 499."""

from __future__ import annotations

import time

import httpx
import pytest

from inferlab_bench.simulator import LatencyConfig
from tests.simulator.conftest import StartSimulator, chat_body

pytestmark = pytest.mark.timeout(30)


def test_disconnect_frees_the_slot(start_simulator: StartSimulator) -> None:
    slow = LatencyConfig(prefill_base_ms=0, decode_base_ms=50, decode_ms_per_seq=0, max_num_seqs=1)
    sim = start_simulator(latency=slow)
    url = f"{sim.base_url}/v1/chat/completions"
    with httpx.Client(timeout=10) as client:
        with client.stream("POST", url, json=chat_body(max_tokens=100, ignore_eos=True)) as r:
            next(r.iter_lines())
        t0 = time.monotonic()
        done = client.post(url, json=chat_body(max_tokens=2, ignore_eos=True))
        assert done.status_code == 200
        assert time.monotonic() - t0 < 2  # not stuck behind 100 x 50 ms
    deadline = time.monotonic() + 5
    while len(sim.ground_truth()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    dropped = next(r for r in sim.ground_truth() if r["max_tokens"] == 100)
    assert dropped["status"] == 499 and dropped["completion_tokens"] < 100

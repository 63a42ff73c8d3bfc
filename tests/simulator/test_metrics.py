"""vLLM-style /metrics: valid Prometheus text whose counters are the ground-truth file's sums."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from inferlab_bench.case.server_metrics import comparison, scrape
from inferlab_bench.simulator import LatencyConfig
from inferlab_bench.simulator.metrics import TTFT_BUCKETS, Histogram, finished_reason
from tests.simulator.conftest import StartSimulator, chat_body

pytestmark = pytest.mark.timeout(30)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by (name, labels without engine/model_name), via Prometheus' own parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            kept = {k: v for k, v in sample.labels.items() if k not in ("engine", "model_name")}
            labels = tuple(sorted(kept.items()))
            out[(sample.name, labels)] = sample.value
    return out


def _traffic(client: httpx.Client, base_url: str) -> None:
    shared = "A long shared system prompt that fills a few cache blocks. " * 8
    for i in range(6):
        body = chat_body(shared + str(i), max_tokens=3 + i, ignore_eos=i % 2 == 0)
        client.post(f"{base_url}/v1/chat/completions", json=body)
    client.post(f"{base_url}/v1/completions", json={"prompt": shared, "max_tokens": 2})
    client.post(f"{base_url}/generate", json={"text": shared, "sampling_params": {}})


def test_counters_and_histograms_equal_the_ground_truth_file(
    start_simulator: StartSimulator, client: httpx.Client, tmp_path: Path
) -> None:
    path = tmp_path / "truth.jsonl"
    sim = start_simulator(ground_truth_path=path, faults={"error_rate": 0.3}, seed=4)
    _traffic(client, sim.base_url)
    r = client.get(f"{sim.base_url}/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    got = _samples(r.text)
    truth = [json.loads(line) for line in path.read_text().splitlines()]
    requests = [t for t in truth if t["kind"] == "request"]
    admitted = [t for t in requests if t["admitted_ns"] is not None]
    assert 0 < len(admitted) < len(requests)  # the seed gives both errors and served requests
    assert got["vllm:prompt_tokens_total", ()] == sum(t["prompt_tokens"] for t in admitted)
    assert got["vllm:prefix_cache_queries_total", ()] == sum(t["prompt_tokens"] for t in admitted)
    hits = sum(t["cached_tokens"] for t in admitted)
    assert hits > 0 and got["vllm:prefix_cache_hits_total", ()] == hits
    generated = sum(t["completion_tokens"] for t in requests)
    assert got["vllm:generation_tokens_total", ()] == generated
    for reason in ("stop", "length", "abort"):
        expected = sum(finished_reason(t) == reason for t in requests)
        assert got["vllm:request_success_total", (("finished_reason", reason),)] == expected
    ttft = [t["first_token_before_ns"] - t["arrival_ns"] for t in requests if t["first_token_ns"]]
    assert got["vllm:time_to_first_token_seconds_count", ()] == len(ttft)
    assert got["vllm:time_to_first_token_seconds_sum", ()] == sum(ttft) / 1e9
    for bound in TTFT_BUCKETS:
        expected = sum(ns / 1e9 <= bound for ns in ttft)
        assert got["vllm:time_to_first_token_seconds_bucket", (("le", str(bound)),)] == expected
    e2e = [t["end_ns"] - t["arrival_ns"] for t in requests if finished_reason(t)]
    assert got["vllm:e2e_request_latency_seconds_count", ()] == len(e2e)
    assert got["vllm:e2e_request_latency_seconds_sum", ()] == sum(e2e) / 1e9
    assert got["vllm:num_requests_running", ()] == 0 == got["vllm:num_requests_waiting", ()]


def test_gauges_show_running_and_waiting_sequences(start_simulator: StartSimulator) -> None:
    latency = LatencyConfig(decode_base_ms=100, decode_ms_per_seq=0, max_num_seqs=1)
    sim = start_simulator(latency=latency)

    def send() -> None:
        body = chat_body(max_tokens=6, ignore_eos=True)
        httpx.post(f"{sim.base_url}/v1/chat/completions", json=body, timeout=10)

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    got = _samples(httpx.get(f"{sim.base_url}/metrics").text)
    for thread in threads:
        thread.join()
    assert got["vllm:num_requests_running", ()] == 1
    assert got["vllm:num_requests_waiting", ()] == 1


def test_the_case_stage_scrape_maps_the_vllm_series(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator()
    client.post(f"{sim.base_url}/v1/chat/completions", json=chat_body("warm", max_tokens=1))
    before = scrape(sim.base_url)
    _traffic(client, sim.base_url)
    after = scrape(sim.base_url)
    window = [t for t in sim.ground_truth() if t["kind"] == "request"][1:]
    ours: dict[str, float] = {
        "prompt_tokens": sum(t["reported_prompt_tokens"] for t in window),
        "output_tokens": sum(t["completion_tokens"] for t in window),
        "cached_prompt_tokens": sum(t["cached_tokens"] for t in window),
        "requests": len(window),
    }
    document: dict[str, Any] = comparison(before, after, ours)
    assert document["served"] is True and document["family"] == "vllm"
    assert set(document["figures"]) == set(ours)
    assert all(f["difference"] == 0 for f in document["figures"].values()), document["figures"]
    assert document["figures"]["cached_prompt_tokens"]["server"] > 0


def test_histogram_buckets_are_inclusive_upper_bounds() -> None:
    h = Histogram((0.001, 0.01))
    for ns in (1_000_000, 1_000_001, 20_000_000):
        h.observe(ns)
    assert h.counts == [1, 1] and h.count == 3 and h.sum_ns == 22_000_001

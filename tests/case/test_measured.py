"""Verdicts decided by the simulator's truth, on real AIPerf runs against it.

The simulator announces itself on GET /v1/models; the case stage then asks it for the truth
of its own requests and decides ``client_cost_low`` by the client-added latency it measured.
Both directions: an untouched client passes, and a client braked by SIGSTOP (AIPerf's
processes frozen 60% of every 200 ms, the calibration's brake made stronger) fails with the
measured figure in its sentence. The server is slow enough (TTFT ~200 ms, ITL ~20 ms) that
the tolerance, max(3 ms, 5%), is ~10 ms on TTFT (1 ms on ITL, ~42 ms on E2E): at load 12-28
on 2 cores an untouched client added at most 2.5 ms to TTFT p90 against a 60 ms TTFT
(docs/calibration.md), and the brake adds about 100 ms.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import orjson
import pytest

from inferlab_bench import schema
from inferlab_bench.case.stage import CaseOptions, run_case
from inferlab_bench.protocol import ClientStatus
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR, make_request
from tests.case.test_scheduled import descendants

pytestmark = pytest.mark.slow

# 32 output tokens: one late read of the last token adds a 31st of itself to the ITL (the ITL
# tolerance is max(0.5 ms, 5% of 20 ms) = 1 ms).
RANDOM = {"kind": "random", "input_tokens": 32, "output_tokens": 32}
CONCURRENCY = {"kind": "concurrency_limited", "concurrency": 2}
VALIDITY_SCHEMA = orjson.loads(schema.VALIDITY_SCHEMA_PATH.read_bytes())


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    latency = LatencyConfig(prefill_base_ms=200, prefill_ms_per_token=0, decode_base_ms=20)
    config = SimulatorConfig(model="sim-model", tokenizer=TOKENIZER_DIR, latency=latency)
    with running_simulator(config) as running:
        yield running


@contextlib.contextmanager
def brake(share: float = 0.6, period: float = 0.2) -> Iterator[None]:
    """Freeze every process below this one (AIPerf's; the simulator is a thread here) for
    ``share`` of every ``period`` seconds on average while the block runs.

    Each freeze and each pause between lasts half to one and a half times its share of the
    period, drawn from a seeded generator: with a fixed 200 ms cycle the closed loop locked
    onto it (a request sent as AIPerf woke had its first token 200 ms later, again as it
    woke, and its last one too), and a run read every first and last token on time while
    frozen 120 ms mid-stream (under a CPU hog, 1 run in 2)."""
    done = threading.Event()
    draw = random.Random(7)

    def run() -> None:
        while not done.is_set():
            stopped = descendants(os.getpid())
            try:
                for pid in stopped:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGSTOP)
                time.sleep(share * period * draw.uniform(0.5, 1.5))
            finally:
                for pid in stopped:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
            time.sleep((1 - share) * period * draw.uniform(0.5, 1.5))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5)


def run(sim: Any, directory: Path) -> dict[str, Any]:
    request = make_request(
        port=sim.port,
        artifact_dir=directory,
        source=RANDOM,
        load_shape=CONCURRENCY,
        request_count=16,
        budget=600.0,  # AIPerf's start alone took 100 s on this host at load 16
    )
    result = run_case(request, CaseOptions(echo=io.StringIO()))
    assert result.status is ClientStatus.SUCCEEDED, result.error
    doc: dict[str, Any] = orjson.loads((directory / "validity.json").read_bytes())
    jsonschema.Draft202012Validator(VALIDITY_SCHEMA).validate(doc)
    return doc


def test_the_simulator_announces_itself_and_serves_the_truth_of_given_ids(sim: Any) -> None:
    models = httpx.get(f"{sim.base_url}/v1/models")
    assert models.headers["x-inferlab-simulator"]
    body = {"model": "sim-model", "prompt": "hi", "max_tokens": 2}
    headers = {"X-Request-ID": "mine-1"}
    httpx.post(f"{sim.base_url}/v1/completions", json=body, headers=headers).raise_for_status()
    found = httpx.post(
        f"{sim.base_url}/inferlab/ground-truth", json={"x_request_ids": ["mine-1", "absent"]}
    )
    assert [r["x_request_id"] for r in found.json()["records"]] == ["mine-1"]
    bad = httpx.post(f"{sim.base_url}/inferlab/ground-truth", json={"x_request_ids": [1]})
    assert bad.status_code == 400 and "x_request_ids" in bad.text


def test_an_untouched_client_passes_by_the_measured_client_added_latency(
    sim: Any, tmp_path: Path
) -> None:
    doc = run(sim, tmp_path)
    measured = doc["measured"]
    assert measured["requests"] == 16
    assert len((tmp_path / "server-truth.jsonl").read_bytes().splitlines()) == 16
    check = doc["client_cost"]["checks"][0]
    assert check["name"] == "client_added_latency_ms"
    assert doc["verdicts"]["client_cost_low"] == "pass", doc["explanations"]["client_cost_low"]
    assert measured["client_added_ms"]["ttft_p90"] <= measured["client_allowed_ms"]["ttft_p90"]
    # The proxies stay as figures, and what they said alone is kept.
    assert "client_cost_low" in measured["by_proxies"]
    assert {c["name"] for c in measured["proxy_checks"]} >= {"first_token_read_late_p90_ms"}
    sentence = doc["explanations"]["client_cost_low"]
    assert sentence.startswith("Against the simulator's ground truth (16 requests)")
    assert "within max(3 ms, 5%)" in sentence and "Proxies:" in sentence
    # load_generator_kept_up: the truth of lateness took the dispatch delay's place.
    names = [c["name"] for c in doc["dispatch"]["checks"]]
    assert "arrival_late_p95_ms" in names and "dispatch_delay_p95_ms" not in names
    assert measured["arrival_late_ms"]["p95"] >= doc["dispatch"]["dispatch_delay_ms"]["p95"]


def test_a_braked_client_fails_and_its_sentence_gives_the_measured_figure(
    sim: Any, tmp_path: Path
) -> None:
    with brake():
        doc = run(sim, tmp_path)
    measured = doc["measured"]
    check = doc["client_cost"]["checks"][0]
    assert doc["verdicts"]["client_cost_low"] == "fail", doc["explanations"]
    assert check["observed"] > check["bound"]
    added = max(v for v in measured["client_added_ms"].values() if v is not None)
    assert added > 20.0, measured  # the brake froze AIPerf 120 ms at a time
    sentence = doc["explanations"]["client_cost_low"]
    assert f"the client added {check['observed']:+.2f} ms to" in sentence
    assert "beyond max(" in sentence

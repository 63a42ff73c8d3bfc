"""The real ``aiperf profile`` against the simulator: AIPerf accepts our stream and usage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from inferlab_bench.simulator import LatencyConfig
from tests.simulator.conftest import StartSimulator

# AIPerf's own start-up bounds this run, not its 6 requests: on 2 cores it took 14 s from
# start to its first request at load average 2, and 17 to 85 s at 15 to 18 (2026-12-07, 11
# runs); 110 s timed out under a CPU hog per core at load average 25. Twice the worst start-up,
# plus its exit; the test's own bound leaves room for the simulator's start.
AIPERF_SECONDS = 240
pytestmark = [pytest.mark.slow, pytest.mark.timeout(AIPERF_SECONDS + 60)]

REQUESTS = 6
OUTPUT_TOKENS = 8


def _aiperf(base_url: str, tokenizer: str, artifacts: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "aiperf",
        "profile",
        "--model",
        "sim-model",
        "--url",
        base_url,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--tokenizer",
        tokenizer,
        "--use-server-token-count",
        "--extra-inputs",
        "ignore_eos:true",
        "--extra-inputs",
        '{"stream_options":{"include_usage":true}}',
        "--request-count",
        str(REQUESTS),
        "--concurrency",
        "2",
        "--prompt-input-tokens-mean",
        "32",
        "--prompt-input-tokens-stddev",
        "0",
        "--prompt-output-tokens-mean",
        str(OUTPUT_TOKENS),
        "--prompt-output-tokens-stddev",
        "0",
        "--random-seed",
        "1",
        "--output-artifact-dir",
        str(artifacts),
        "--ui-type",
        "none",
        "--no-server-metrics",
        "--no-gpu-telemetry",
        "--workers-max",
        "1",
    ]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=AIPERF_SECONDS, cwd=artifacts.parent
    )


def test_aiperf_completes_against_the_simulator(
    start_simulator: StartSimulator, qwen_dir: str, tmp_path: Path
) -> None:
    latency = LatencyConfig(prefill_base_ms=2, decode_base_ms=2, decode_ms_per_seq=0)
    sim = start_simulator(tokenizer=qwen_dir, latency=latency)
    artifacts = tmp_path / "artifacts"
    done = _aiperf(sim.base_url, qwen_dir, artifacts)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    summary = json.loads((artifacts / "profile_export_aiperf.json").read_text())
    assert summary["request_count"]["avg"] == REQUESTS
    assert summary["output_sequence_length"]["avg"] == OUTPUT_TOKENS
    assert not summary.get("error_summary")

    records = [
        json.loads(line) for line in (artifacts / "profile_export.jsonl").read_text().splitlines()
    ]
    truth = {r["x_request_id"]: r for r in sim.ground_truth() if r["kind"] == "request"}
    assert len(records) == REQUESTS == len(truth)
    for record in records:
        ours = truth[record["metadata"]["x_request_id"]]  # AIPerf's records join on X-Request-ID
        assert record.get("error") is None and ours["status"] == 200
        assert record["metrics"]["usage_prompt_tokens"]["value"] == ours["prompt_tokens"]
        assert record["metrics"]["output_sequence_length"]["value"] == ours["completion_tokens"]

"""Real AIPerf runs against the simulator for the validity end-to-end tests."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import orjson

from inferlab_bench import validity
from inferlab_bench.case.records import read_records
from inferlab_bench.validity import Expectations, PhaseRecords

TOPICS = ("rivers", "glaciers", "volcanoes", "deserts", "forests", "oceans", "caves", "islands")


def qwen_dir() -> str:
    from inferlab_bench.runs.demo import TOKENIZER_DIR

    return TOKENIZER_DIR


def population_lines(n: int) -> list[dict[str, Any]]:
    """Distinct prompts of varied length with varied output lengths (as prepare writes them)."""
    lines = []
    for i in range(n):
        # Long enough (60-110 tokens) that a stale cache shows as whole 16-token blocks.
        text = (
            f"Question {i}: tell me about {TOPICS[i % 8]}, their history and how they form"
            + ", with more detail on each part" * (6 + i % 8)
        )
        out = 4 + i % 7
        lines.append(
            {
                "extra": {"ignore_eos": True, "min_tokens": out},
                "messages": [{"role": "user", "content": text}],
                "output_length": out,
                "session_id": f"inferlab-{i:08d}",
            }
        )
    return lines


def write_population(directory: Path, n: int) -> tuple[Path, bytes, Expectations]:
    """population.jsonl and what it plans per session (input tokens via the chat template)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(qwen_dir(), local_files_only=True)
    lines = population_lines(n)
    data = b"".join(orjson.dumps(line, option=orjson.OPT_SORT_KEYS) + b"\n" for line in lines)
    path = directory / "population.jsonl"
    path.write_bytes(data)
    inputs = {}
    for line in lines:
        ids = tokenizer.apply_chat_template(
            line["messages"], add_generation_prompt=True, tokenize=True
        )
        inputs[line["session_id"]] = len(ids["input_ids"] if isinstance(ids, Mapping) else ids)
    outputs = {line["session_id"]: line["output_length"] for line in lines}
    return path, data, Expectations(input_tokens=inputs, output_tokens=outputs)


def prewarm_and_reset(base_url: str, population: Path) -> None:
    """Fill the prefix cache with every population prompt, then ask the server to reset it."""
    with httpx.Client(timeout=30.0) as client:
        for raw in population.read_bytes().splitlines():
            line = orjson.loads(raw)
            body = {"model": "sim-model", "messages": line["messages"], "max_tokens": 1}
            client.post(f"{base_url}/v1/chat/completions", json=body).raise_for_status()
        client.post(f"{base_url}/reset_prefix_cache").raise_for_status()


def run_aiperf(
    directory: Path,
    base_url: str,
    population: Path,
    profiling: dict[str, Any],
    slos: dict[str, float] | None = None,
    seed: int = 7,
) -> Path:
    """Run ``aiperf profile --config`` and return the records file (PREFIX.jsonl)."""
    entries = sum(1 for _ in population.open("rb"))
    config = {
        "schemaVersion": "2.0",
        "randomSeed": seed,
        "benchmark": {
            "model": "sim-model",
            "endpoint": {
                "url": f"{base_url}/v1/chat/completions",
                "type": "chat",
                "streaming": True,
                "timeout": 60,
                "useServerTokenCount": True,
                "extra": {"ignore_eos": True, "n": 1, "stream_options": {"include_usage": True}},
            },
            "dataset": {
                "type": "file",
                "path": str(population),
                "format": "mooncake_trace",
                "entries": entries,
                "sampling": "sequential",
            },
            "profiling": profiling,
            "tokenizer": {"name": qwen_dir()},
            "runtime": {"ui": "none"},
            "gpuTelemetry": {"enabled": False},
            "serverMetrics": {"enabled": False},
            "artifacts": {
                "dir": str(directory / "aiperf"),
                "prefix": "p",
                "summary": ["json"],
                "records": ["jsonl"],
                "raw": False,
            },
        },
    }
    if slos:
        config["benchmark"]["slos"] = slos
    config_path = directory / "aiperf.json"
    config_path.write_text(json.dumps(config))
    command = [sys.executable, "-m", "aiperf", "profile", "--config", str(config_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return directory / "aiperf" / "p.jsonl"


def phase_records(records_path: Path) -> PhaseRecords:
    """The profiling phase's records as validity columns, read as the case stage reads them."""
    return validity.phase_records(read_records(records_path).profiling)

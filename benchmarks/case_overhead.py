"""Case-stage overhead: invocation -> first request, client time beyond the load, records parsing.

Side by side in one run: our case (cold and warm AIPerf dataset cache) and AIPerf run by hand
on the very config our case wrote (``python -m aiperf profile --config``), so the difference
is what inferlab-bench itself adds (probe, reset, config, records, SLO, validity).

Run: ``python benchmarks/case_overhead.py`` (needs the test extra for the Qwen2 tokenizer).
Prints one JSON object with the figures.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench import validity
from inferlab_bench.case.records import read_records
from inferlab_bench.case.runner import aiperf_command
from inferlab_bench.case.slo import slo_result
from inferlab_bench.case.stage import CaseOptions, run_case
from inferlab_bench.protocol import BenchClientRequest, ConcurrencyLimited
from inferlab_bench.runs.demo import TOKENIZER_DIR
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator

TOKENIZER = TOKENIZER_DIR
REQUESTS, CONCURRENCY, OUTPUT = 32, 4, 16


def population(path: Path, nonce: str) -> dict[str, Any]:
    lines = []
    for i in range(REQUESTS):
        entry = {
            "extra": {"ignore_eos": True, "min_tokens": OUTPUT},
            "messages": [{"content": f"{nonce} question {i}: describe a harbour.", "role": "user"}],
            "output_length": OUTPUT,
            "session_id": f"inferlab-{i:08d}",
        }
        lines.append(orjson.dumps(entry, option=orjson.OPT_SORT_KEYS) + b"\n")
    data = b"".join(lines)
    path.write_bytes(data)
    return {
        "path": str(path),
        "sha256": hashlib.sha256(data).hexdigest(),
        "entries": REQUESTS,
        "tpot_applicable": True,
    }


def request(port: int, pop: dict[str, Any], artifact_dir: Path) -> BenchClientRequest:
    return BenchClientRequest.model_validate_json(
        orjson.dumps(
            {
                "protocol_version": "6",
                "endpoint": {
                    "protocol": "http",
                    "host": "127.0.0.1",
                    "port": port,
                    "completions_path": "/v1/completions",
                    "chat_completions_path": "/v1/chat/completions",
                },
                "model": {"locator": TOKENIZER, "served_name": "sim-model"},
                "definition": {
                    "request_source": {
                        "kind": "dataset",
                        "dataset": "sharegpt",
                        "max_input_tokens": 1024,
                        "output_tokens": OUTPUT,
                        "catalog": _catalog(),
                    },
                    "seed": 1,
                    "timeout_seconds": 60,
                },
                "population": pop,
                "case": {
                    "load_shape": {"kind": "concurrency_limited", "concurrency": CONCURRENCY},
                    "request_count": REQUESTS,
                },
                "case_budget_seconds": 300.0,
                "artifact_dir": str(artifact_dir),
            }
        )
    )


def _catalog() -> dict[str, Any]:
    return {
        "upstream_identity": "x",
        "url": "http://x",
        "sha256": "0" * 64,
        "source_format": "sharegpt-json-array-v1",
        "license": "Apache-2.0",
        "cache_path": "/nonexistent",
        "cache_state": "missing",
        "materialization_identity": "sharegpt-single-request-v1",
    }


def one_case(sim: Any, pop: dict[str, Any], root: Path, name: str) -> dict[str, float]:
    seen = len(sim.ground_truth())
    started = time.time_ns()
    result = run_case(request(sim.port, pop, root / name), CaseOptions(echo=io.StringIO()))
    finished = time.time_ns()
    assert result.status.value == "succeeded", result.error
    return _timeline(sim, seen, started, finished)


def bare_aiperf(sim: Any, root: Path, case_name: str) -> dict[str, float]:
    """AIPerf by hand on the config our case ``case_name`` wrote, into a fresh directory."""
    config = orjson.loads((root / case_name / "aiperf-config.json").read_bytes())
    config["benchmark"]["artifacts"]["dir"] = str(root / "bare" / "aiperf")
    path = root / "bare-config.json"
    path.write_bytes(orjson.dumps(config))
    seen = len(sim.ground_truth())
    started = time.time_ns()
    subprocess.run(aiperf_command(path), check=True, capture_output=True)
    finished = time.time_ns()
    return _timeline(sim, seen, started, finished)


def _timeline(sim: Any, seen: int, started: int, finished: int) -> dict[str, float]:
    truth = [e for e in sim.ground_truth()[seen:] if e["kind"] == "request"]
    first, last = min(e["arrival_ns"] for e in truth), max(e["end_ns"] for e in truth)
    return {
        "wall_s": (finished - started) / 1e9,
        "invocation_to_first_request_s": (first - started) / 1e9,
        "load_s": (last - first) / 1e9,
        "after_last_response_s": (finished - last) / 1e9,
        "client_overhead_s": (finished - started - (last - first)) / 1e9,
    }


def synthetic_records(path: Path, count: int) -> None:
    with path.open("wb") as handle:
        for i in range(count):
            start = 1_800_000_000_000_000_000 + i * 1_000_000
            record = {
                "metadata": {
                    "session_num": i,
                    "x_request_id": str(uuid.UUID(int=i)),
                    "conversation_id": f"inferlab-{i:08d}",
                    "turn_index": 0,
                    "credit_issued_ns": start - 1000,
                    "request_start_ns": start,
                    "request_ack_ns": start + 5_000_000,
                    "request_end_ns": start + 200_000_000,
                    "worker_id": "worker_0",
                    "record_processor_id": "rp_0",
                    "benchmark_phase": "profiling",
                    "phase_index": 0,
                    "phase_name": "profiling",
                    "phase_kind": "profiling",
                    "was_cancelled": False,
                },
                "metrics": {
                    "time_to_first_token": {"value": 20.5, "unit": "ms"},
                    "request_latency": {"value": 200.0, "unit": "ms"},
                    "inter_token_latency": {"value": 12.0, "unit": "ms"},
                    "inter_chunk_latency": {"value": [12.0] * (OUTPUT - 1), "unit": "ms"},
                    "output_sequence_length": {"value": OUTPUT, "unit": "tokens"},
                    "input_sequence_length": {"value": 300, "unit": "tokens"},
                    "usage_prompt_tokens": {"value": 300, "unit": "tokens"},
                    "usage_prompt_cache_read_tokens": {"value": 0, "unit": "tokens"},
                    "good_request_count": {"value": 1, "unit": "requests"},
                    **{
                        f"http_req_{k}": {"value": 1.0, "unit": "ms"}
                        for k in (
                            "receiving",
                            "sending",
                            "waiting",
                            "duration",
                            "total",
                            "blocked",
                            "connecting",
                        )
                    },
                },
            }
            handle.write(orjson.dumps(record) + b"\n")


def records_processing(root: Path, count: int = 100_000) -> dict[str, float]:
    path = root / "profile.jsonl"
    synthetic_records(path, count)
    started = time.perf_counter()
    records = read_records(path)
    parsed = time.perf_counter()
    slo_result(records.profiling, request_count=count, native_good_count=float(count))
    judged = time.perf_counter()
    validity.assess_case(
        records,
        ConcurrencyLimited(kind="concurrency_limited", concurrency=64),
        expectations=None,
        population_sha256=None,
        reset_requested=False,
    )
    done = time.perf_counter()
    return {
        "records": count,
        "file_mb": path.stat().st_size / 1e6,
        "parse_s": parsed - started,
        "slo_s": judged - parsed,
        "validity_s": done - judged,
        "total_s": done - started,
    }


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        latency = LatencyConfig(prefill_base_ms=30.0, decode_base_ms=10.0)
        figures: dict[str, Any] = {}
        with running_simulator(SimulatorConfig(tokenizer=TOKENIZER, latency=latency)) as sim:
            pop = population(
                root / "population.jsonl", uuid.uuid4().hex
            )  # new bytes: AIPerf cache miss
            figures["cold_dataset_cache"] = one_case(sim, pop, root, "cold")
            figures["warm_dataset_cache"] = one_case(sim, pop, root, "warm")
            figures["aiperf_by_hand_warm"] = bare_aiperf(sim, root, "warm")
        ours, bare = figures["warm_dataset_cache"], figures["aiperf_by_hand_warm"]
        figures["inferlab_added_s"] = {
            key: ours[key] - bare[key]
            for key in ("wall_s", "invocation_to_first_request_s", "after_last_response_s")
        }
        figures["records_100k"] = records_processing(root)
    json.dump(figures, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Stand-in local AIPerf configs with the shape DESIGN.md describes, for each load shape."""

from __future__ import annotations

import copy
import json
from typing import Any

from inferlab_bench.protocol import BenchClientRequest
from tests.protocol.examples import LOAD_SHAPES, case_request

SHA = "ab" * 32


def request(
    load_shape: dict[str, Any], *, warmup: int = 0, reset: bool = False
) -> BenchClientRequest:
    data = case_request(load_shape)
    data["case"]["warmup_request_count"] = warmup
    data["definition"]["reset_prefix_cache"] = reset
    data["model"]["locator"] = "Qwen/Qwen2-0.5B-Instruct"
    return BenchClientRequest.model_validate_json(json.dumps(data))


def profiling(req: BenchClientRequest) -> dict[str, Any]:
    shape = req.case.load_shape
    count = req.case.request_count
    if shape.kind == "concurrency_limited":
        return {"type": "concurrency", "concurrency": shape.concurrency, "requests": count}
    if shape.kind == "unbounded_request_rate":
        return {"type": "concurrency", "concurrency": count, "requests": count}
    if shape.burstiness is None:
        return {"type": "poisson", "rate": shape.request_rate, "requests": count}
    return {
        "type": "gamma",
        "rate": shape.request_rate,
        "smoothness": shape.burstiness,
        "requests": count,
    }


def local_config(req: BenchClientRequest) -> dict[str, Any]:
    warmup = req.case.warmup_request_count
    benchmark: dict[str, Any] = {
        "model": req.model.served_name,
        "endpoint": {
            "url": req.endpoint.chat_completions_url,
            "type": "chat",
            "streaming": True,
            "timeout": 600,
            "useServerTokenCount": True,
            "extra": {
                "ignore_eos": True,
                "n": 1,
                "stream_options": {"include_usage": True},
                "temperature": 0.0,
            },
        },
        "dataset": {
            "type": "file",
            "path": str(req.population.path),
            "format": "mooncake_trace",
            "entries": warmup + req.case.request_count,
            "sampling": "sequential",
        },
        "profiling": profiling(req),
        "tokenizer": {"name": req.model.locator},
        "runtime": {"ui": "none"},
        "gpuTelemetry": {"enabled": False},
        "serverMetrics": {"enabled": False},
        "slos": {"request_latency": 2000.0, "time_to_first_token": 250.0},
        "artifacts": {
            "dir": str(req.artifact_dir / "aiperf"),
            "prefix": "profile",
            "summary": ["json"],
            "records": ["jsonl"],
            "raw": True,
        },
    }
    if warmup:
        benchmark["warmup"] = {"type": "concurrency", "concurrency": 1, "requests": warmup}
    return copy.deepcopy(
        {"schemaVersion": "2.0", "benchmark": benchmark, "randomSeed": req.definition.seed}
    )


ALL_SHAPES = LOAD_SHAPES

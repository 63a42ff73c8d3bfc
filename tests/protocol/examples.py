"""Example v6 requests and results covering every variant of the Bench wire types."""

from __future__ import annotations

import copy
from typing import Any

CATALOG: dict[str, Any] = {
    "upstream_identity": "huggingface:anon8231489123/ShareGPT_Vicuna_unfiltered@"
    "bcd32a724d8460ebe14e1d05b0195e30e9a46cb1:ShareGPT_V3_unfiltered_cleaned_split.json",
    "url": "https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/resolve/"
    "bcd32a724d8460ebe14e1d05b0195e30e9a46cb1/ShareGPT_V3_unfiltered_cleaned_split.json",
    "sha256": "35f0e213ce091ed9b9af2a1f0755e9d39f9ccec34ab281cd4ca60d70f6479ba4",
    "source_format": "sharegpt-json-array-v1",
    "license": "Apache-2.0",
    "cache_path": "/cache/inferlab/datasets/sha256/"
    "35f0e213ce091ed9b9af2a1f0755e9d39f9ccec34ab281cd4ca60d70f6479ba4",
    "cache_state": "missing",
    "materialization_identity": "sharegpt-single-request-v1",
}

DATASET_SOURCE: dict[str, Any] = {
    "kind": "dataset",
    "dataset": "sharegpt",
    "max_input_tokens": 1024,
    "output_tokens": None,
    "catalog": CATALOG,
}
RANDOM_SOURCE: dict[str, Any] = {"kind": "random", "input_tokens": 128, "output_tokens": 32}

MODEL = {"locator": "/models/qwen2", "served_name": "qwen2"}
ENDPOINT = {
    "protocol": "http",
    "host": "127.0.0.1",
    "port": 8000,
    "completions_path": "/v1/completions",
    "chat_completions_path": "/v1/chat/completions",
}
POPULATION = {
    "path": "/runs/p/population.jsonl",
    "sha256": "ab" * 32,
    "entries": 64,
    "tpot_applicable": True,
}

LOAD_SHAPES: list[dict[str, Any]] = [
    {"kind": "concurrency_limited", "concurrency": 8},
    {"kind": "request_rate_limited", "request_rate": 4.5, "burstiness": None},
    {"kind": "request_rate_limited", "request_rate": 2.0, "burstiness": 0.5},
    {"kind": "unbounded_request_rate"},
]

SLO = {
    "request_latency_ms": 2000.0,
    "ttft_ms": 250.0,
    "tpot_ms": None,
    "minimum_good_request_ratio": 0.9,
}


def prep_request(source: dict[str, Any] | None = None) -> dict[str, Any]:
    return copy.deepcopy(
        {
            "protocol_version": "6",
            "model": MODEL,
            "request_source": source or DATASET_SOURCE,
            "source_path": "/data/sharegpt.json",
            "required_entries": 64,
            "seed": 7,
            "request_body": {"chat_template_kwargs": {"enable_thinking": False}},
            "artifact_dir": "/runs/p",
        }
    )


def case_request(
    load_shape: dict[str, Any], source: dict[str, Any] | None = None
) -> dict[str, Any]:
    return copy.deepcopy(
        {
            "protocol_version": "6",
            "endpoint": ENDPOINT,
            "model": MODEL,
            "definition": {
                "request_source": source or DATASET_SOURCE,
                "seed": 7,
                "request_body": {
                    "temperature": 0.0,
                    "stop": ["\n\n"],
                    "nested": {"a": [1, 2.5, True]},
                },
                "request_slo": SLO,
                "timeout_seconds": 600,
                "reset_prefix_cache": True,
            },
            "population": POPULATION,
            "case": {"load_shape": load_shape, "request_count": 64, "warmup_request_count": 4},
            "case_budget_seconds": 900.5,
            "artifact_dir": "/runs/c1",
        }
    )


def prep_result_succeeded() -> dict[str, Any]:
    summary = {"minimum": 3, "maximum": 1000, "mean": 211.5}
    return {
        "schema_version": 1,
        "status": "succeeded",
        "materialization_identity": "sharegpt-single-request-v1",
        "requested_entries": 64,
        "candidate_entries": 94145,
        "admitted_entries": 50000,
        "ineligible_entries": 44145,
        "ineligible_reasons": {"invalid_conversation": 40000, "input_exceeds_maximum": 4145},
        "population": POPULATION,
        "input_tokens": summary,
        "output_tokens": summary,
        "evidence_path": "/runs/p/population-evidence.jsonl",
        "error": None,
    }


def case_result_succeeded() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "status": "succeeded",
        "completed_requests": 63,
        "failed_requests": 1,
        "normalization_schema": "aiperf-summary-v1",
        "metrics": {"request_throughput": 3.5, "p99_ttft_ms": 120.25},
        "request_slo": {
            "good_requests": 60,
            "good_request_ratio": 0.9375,
            "goodput": 3.2,
            "profiling_duration_seconds": 18.75,
            "profiling_duration_source": "native-profiling-request-window",
            "request_count_reconciled": True,
            "native_aggregate_good_request_count": 60,
            "native_aggregate_good_request_count_consistent": True,
        },
        "native_command": ["aiperf", "profile", "--config", "/runs/c1/aiperf-config.json"],
        "native_exit_code": 0,
        "raw_artifacts": [
            {"name": "summary", "kind": "aiperf-summary-json", "path": "/runs/c1/x.json"}
        ],
        "error": None,
    }

"""Builders for case tests: a population file, a BenchClientRequest, simulator settings."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.layout import evidence_path
from inferlab_bench.protocol import BenchClientRequest
from inferlab_bench.runs.demo import TOKENIZER_DIR
from inferlab_bench.tokenizer import common_prefix_length

_TOPICS = ("cats", "rivers", "trains", "gardens", "stars", "bridges", "music", "islands")


def population_line(index: int, output_length: int) -> bytes:
    topic = _TOPICS[index % len(_TOPICS)]
    entry = {
        "extra": {"ignore_eos": True, "min_tokens": output_length},
        "messages": [
            {"content": f"Entry {index}: write a few words about {topic}.", "role": "user"}
        ],
        "output_length": output_length,
        "session_id": f"inferlab-{index:08d}",
    }
    return orjson.dumps(entry, option=orjson.OPT_SORT_KEYS)


def write_population(path: Path, output_lengths: list[int]) -> dict[str, Any]:
    """Write population.jsonl in the prepare stage's exact format, and next to it the
    evidence's ``input_tokens`` (counted through the chat template); return its wire facts."""
    lines = [population_line(i, n) for i, n in enumerate(output_lengths)]
    data = b"".join(line + b"\n" for line in lines)
    path.write_bytes(data)
    evidence = [{"input_tokens": prompt_tokens(orjson.loads(line)["messages"])} for line in lines]
    evidence_path(path).write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in evidence))
    return {
        "path": str(path),
        "sha256": hashlib.sha256(data).hexdigest(),
        "entries": len(output_lengths),
        "tpot_applicable": min(output_lengths) >= 2,
    }


def prompt_tokens(messages: list[dict[str, str]]) -> int:
    """What the server counts for these messages: the chat template with generation prompt."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR, local_files_only=True)
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return len(ids["input_ids"] if isinstance(ids, Mapping) else ids)


def dataset_source() -> dict[str, Any]:
    return {
        "kind": "dataset",
        "dataset": "sharegpt",
        "max_input_tokens": 1024,
        "output_tokens": None,
        "catalog": {
            "upstream_identity": (
                "huggingface:anon8231489123/ShareGPT_Vicuna_unfiltered"
                "@bcd32a724d8460ebe14e1d05b0195e30e9a46cb1:ShareGPT_V3_unfiltered_cleaned_split.json"
            ),
            "url": (
                "https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered"
                "/resolve/bcd32a724d8460ebe14e1d05b0195e30e9a46cb1"
                "/ShareGPT_V3_unfiltered_cleaned_split.json"
            ),
            "sha256": "35f0e213ce091ed9b9af2a1f0755e9d39f9ccec34ab281cd4ca60d70f6479ba4",
            "source_format": "sharegpt-json-array-v1",
            "license": "Apache-2.0",
            "cache_path": "/nonexistent/cache",
            "cache_state": "missing",
            "materialization_identity": "sharegpt-single-request-v1",
        },
    }


def make_request(
    *,
    port: int,
    artifact_dir: Path,
    population: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    load_shape: dict[str, Any] | None = None,
    request_count: int = 4,
    warmup: int = 0,
    slo: dict[str, Any] | None = None,
    reset_prefix_cache: bool = False,
    budget: float = 120.0,
    body: dict[str, Any] | None = None,
    model: str = "sim-model",
) -> BenchClientRequest:
    data = {
        "protocol_version": "6",
        "endpoint": {
            "protocol": "http",
            "host": "127.0.0.1",
            "port": port,
            "completions_path": "/v1/completions",
            "chat_completions_path": "/v1/chat/completions",
        },
        "model": {"locator": TOKENIZER_DIR, "served_name": model},
        "definition": {
            "request_source": source or dataset_source(),
            "seed": 7,
            "request_body": body or {},
            "request_slo": slo,
            "timeout_seconds": 60,
            "reset_prefix_cache": reset_prefix_cache,
        },
        "population": population,
        "case": {
            "load_shape": load_shape or {"kind": "concurrency_limited", "concurrency": 2},
            "request_count": request_count,
            "warmup_request_count": warmup,
        },
        "case_budget_seconds": budget,
        "artifact_dir": str(artifact_dir),
    }
    return BenchClientRequest.model_validate_json(orjson.dumps(data))


def record(
    index: int,
    *,
    phase: str = "profiling",
    session: int | None = None,
    start_ns: int = 1_000_000_000,
    latency_ms: float = 100.0,
    ttft_ms: float = 20.0,
    good: int | None = 1,
    cached: int | None = 0,
    error: str | None = None,
    cancelled: bool = False,
) -> dict[str, Any]:
    """One AIPerf profiling record with the fields AIPerf 0.13 writes (and a few we ignore)."""
    metrics: dict[str, Any] = {
        "time_to_first_token": {"value": ttft_ms, "unit": "ms"},
        "request_latency": {"value": latency_ms, "unit": "ms"},
        "inter_token_latency": {"value": 5.0, "unit": "ms"},
        "output_sequence_length": {"value": 8, "unit": "tokens"},
        "usage_prompt_tokens": {"value": 30, "unit": "tokens"},
        "inter_chunk_latency": {"value": [5.0, 5.1, 4.9], "unit": "ms"},
    }
    if good is not None:
        metrics["good_request_count"] = {"value": good, "unit": "requests"}
    if cached is not None:
        metrics["usage_prompt_cache_read_tokens"] = {"value": cached, "unit": "tokens"}
    if error is not None:
        metrics = {}
    out: dict[str, Any] = {
        "metadata": {
            "session_num": index if session is None else session,
            "x_request_id": f"req-{index}",
            "conversation_id": f"inferlab-{index:08d}",
            "turn_index": 0,
            "credit_issued_ns": start_ns + index * 1_000_000 - 200_000,
            "request_start_ns": start_ns + index * 1_000_000,
            "request_end_ns": start_ns + index * 1_000_000 + int(latency_ms * 1e6),
            "benchmark_phase": phase,
            "was_cancelled": cancelled,
            "worker_id": "worker_1",
        },
        "metrics": metrics,
    }
    if error is not None:
        out["error"] = {"code": 500, "type": "Internal Server Error", "message": error}
    return out


def write_records(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


_WORDS = (
    "river",
    "stone",
    "maple",
    "lantern",
    "harbor",
    "copper",
    "meadow",
    "signal",
    "orbit",
    "velvet",
    "canyon",
    "ember",
    "glacier",
    "willow",
    "beacon",
    "thistle",
    "quarry",
    "saffron",
    "tundra",
    "marble",
)


def _sentence(seed: int, words: int) -> str:
    return " ".join(_WORDS[(seed * 7 + i * 3) % len(_WORDS)] for i in range(words))


def write_conversations(path: Path, sessions: list[list[int]], words: int = 60) -> dict[str, Any]:
    """Write a conversation population (``sharegpt-multi-turn-v1``) as the prepare stage
    lays it out: one line per turn carrying the whole history (the dataset's assistant
    replies included), the evidence's input and reusable-prefix tokens counted through the
    chat template, and the manifest; ``sessions`` gives each session's output lengths per
    turn. Returns the population's wire facts."""
    lines: list[bytes] = []
    evidence: list[dict[str, Any]] = []
    position = 0
    for number, outputs in enumerate(sessions):
        history: list[dict[str, str]] = []
        previous: list[int] | None = None
        for turn, output_length in enumerate(outputs):
            user = f"Session {number} turn {turn}: {_sentence(number * 31 + turn, words)}"
            messages = [*history, {"content": user, "role": "user"}]
            entry = {
                "extra": {"ignore_eos": True, "min_tokens": output_length},
                "messages": messages,
                "output_length": output_length,
                "session_id": f"inferlab-{number:08d}",
            }
            lines.append(orjson.dumps(entry, option=orjson.OPT_SORT_KEYS))
            ids = template_ids(messages, generation=True)
            reply = {"content": f"Reply {number}.{turn}: {_sentence(turn, words // 2)}"}
            context = template_ids([*messages, {**reply, "role": "assistant"}], generation=False)
            shared = 0 if previous is None else common_prefix_length(ids, previous)
            evidence.append(
                {
                    "input_tokens": len(ids),
                    "output_tokens": output_length,
                    "position": position,
                    "reusable_prefix_tokens": shared,
                    "session_id": entry["session_id"],
                    "turn": turn,
                }
            )
            history = [*messages, {**reply, "role": "assistant"}]
            previous = context
            position += 1
    data = b"".join(line + b"\n" for line in lines)
    path.write_bytes(data)
    evidence_path(path).write_bytes(
        b"".join(orjson.dumps(e, option=orjson.OPT_SORT_KEYS) + b"\n" for e in evidence)
    )
    manifest = {"schema_version": 1, "materialization_identity": "sharegpt-multi-turn-v1"}
    path.with_name("preparation-manifest.json").write_bytes(orjson.dumps(manifest))
    return {
        "path": str(path),
        "sha256": hashlib.sha256(data).hexdigest(),
        "entries": len(lines),
        "tpot_applicable": min(min(s) for s in sessions) >= 2,
    }


def template_ids(messages: list[dict[str, str]], *, generation: bool) -> list[int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR, local_files_only=True)
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=generation, tokenize=True)
    return list(ids["input_ids"] if isinstance(ids, Mapping) else ids)

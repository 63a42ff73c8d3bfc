"""Case requests and populations for the engine tests, and running the CLI on them."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.layout import evidence_path
from inferlab_bench.protocol import BenchClientRequest, dump_json
from inferlab_bench.runs.demo import TOKENIZER_DIR
from tests.case.support import make_request, population_line
from tests.engine.server import RunningLlamaServer

OUTPUT_TOKENS = 8
FILLER = (
    "The river bends past the old mill where the stones are grey and the water runs quick "
    "under a bridge of oak and iron, and the children count the boats that pass each morning."
)


def short_population(path: Path, entries: int) -> dict[str, Any]:
    """Short prompts (about 20 tokens), ``OUTPUT_TOKENS`` each."""
    return write_population(path, [_entry(i, 0) for i in range(entries)])


def long_population(path: Path, entries: int) -> dict[str, Any]:
    """Prompts of 150-300 tokens: a 1% tolerance would hide a constant +1 on every one."""
    return write_population(path, [_entry(i, 4 + i % 4) for i in range(entries)])


def repeating_population(path: Path, entries: int, distinct: int) -> dict[str, Any]:
    """Entry i asks what entry ``i % distinct`` asks: warmup sends the measured prompts."""
    lines = []
    for index in range(entries):
        entry = _entry(index % distinct, 2)
        entry["session_id"] = f"inferlab-{index:08d}"
        lines.append(entry)
    return write_population(path, lines)


def _entry(index: int, filler: int) -> dict[str, Any]:
    entry: dict[str, Any] = orjson.loads(population_line(index, OUTPUT_TOKENS))
    if filler:
        entry["messages"][0]["content"] += " " + " ".join([FILLER] * filler)
    return entry


def write_population(path: Path, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """population.jsonl as prepare writes it, its evidence's input_tokens, its wire facts."""
    data = b"".join(orjson.dumps(e, option=orjson.OPT_SORT_KEYS) + b"\n" for e in entries)
    path.write_bytes(data)
    evidence = [{"input_tokens": prompt_tokens(e["messages"])} for e in entries]
    evidence_path(path).write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in evidence))
    return {
        "path": str(path),
        "sha256": hashlib.sha256(data).hexdigest(),
        "entries": len(entries),
        "tpot_applicable": OUTPUT_TOKENS >= 2,
    }


def prompt_tokens(messages: list[dict[str, str]]) -> int:
    """What the server counts: Qwen3's chat template with the generation prompt."""
    ids = _tokenizer().apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return len(ids["input_ids"] if isinstance(ids, Mapping) else ids)


@functools.cache
def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZER_DIR, local_files_only=True)


def case_request(
    server: RunningLlamaServer, artifact_dir: Path, population: dict[str, Any], **kwargs: Any
) -> BenchClientRequest:
    port = int(server.base_url.rsplit(":", 1)[1])
    kwargs.setdefault("budget", 240.0)
    return make_request(
        port=port, artifact_dir=artifact_dir, population=population, model=server.model_id, **kwargs
    )


def run_json_case(
    request: BenchClientRequest, *args: str, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``inferlab-bench case`` (JSON mode) as a control plane runs it; returns the result."""
    folder = request.artifact_dir.parent
    request_path = folder / f"{request.artifact_dir.name}-request.json"
    result_path = folder / f"{request.artifact_dir.name}-result.json"
    request_path.write_bytes(dump_json(request))
    proc = cli("case", "--input", str(request_path), "--output", str(result_path), *args, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(result_path.read_text())
    return result


def cli(
    *args: str, timeout: float = 240, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inferlab_bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=None if env is None else {**os.environ, **env},
    )


def artifact(result: dict[str, Any], name: str) -> dict[str, Any]:
    [path] = [a["path"] for a in result["raw_artifacts"] if a["name"] == name]
    loaded: dict[str, Any] = json.loads(Path(path).read_text())
    return loaded

"""The frozen outputs: population.jsonl (exact bytes), its evidence, and the manifest."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.atomic import remove_file, write_bytes_atomic
from inferlab_bench.layout import EVIDENCE_FILE, POPULATION_FILE, session_id

POPULATION_SHA_FILE = "population.sha256"
MANIFEST_FILE = "preparation-manifest.json"


@dataclass(frozen=True)
class Entry:
    """One selected request, in selection order."""

    index: int
    source_id: str
    messages: list[dict[str, str]]
    target: str
    total_messages: int
    input_tokens: int
    target_tokens: int
    output_length: int


def population_line(position: int, entry: Entry) -> bytes:
    """Compact, keys sorted, UTF-8 as is: the exact bytes AIPerf reads."""
    return request_line(position, entry.messages, entry.output_length)


def request_line(session: int, messages: list[dict[str, str]], output_length: int) -> bytes:
    """One request of session ``session`` (a single request is a session of one; each turn
    of a conversation population is one line with the whole history)."""
    record = {
        "extra": {"ignore_eos": True, "min_tokens": output_length},
        "messages": messages,
        "output_length": output_length,
        "session_id": session_id(session),
    }
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS) + b"\n"


def evidence_line(position: int, entry: Entry) -> bytes:
    record = {
        "position": position,
        "session_id": session_id(position),
        "index": entry.index,
        "source_id": entry.source_id,
        "messages": entry.messages,
        "target": entry.target,
        "target_sha256": hashlib.sha256(entry.target.encode("utf-8")).hexdigest(),
        "kept_messages": len(entry.messages),
        "removed_messages": entry.total_messages - len(entry.messages),
        "input_tokens": entry.input_tokens,
        "target_tokens": entry.target_tokens,
        "output_tokens": entry.output_length,
    }
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS) + b"\n"


def population_bytes(entries: Sequence[Entry]) -> bytes:
    return b"".join(population_line(i, e) for i, e in enumerate(entries))


@dataclass(frozen=True)
class Written:
    population: Path
    sha256: str
    evidence: Path
    manifest: Path


def write_outputs(directory: Path, entries: Sequence[Entry], manifest: dict[str, Any]) -> Written:
    """Evidence and manifest first, the population last: a population file on disk is
    always complete and matched by its evidence (each file is written atomically)."""
    evidence = b"".join(evidence_line(i, e) for i, e in enumerate(entries))
    return write_files(directory, population_bytes(entries), evidence, manifest)


def write_files(
    directory: Path, data: bytes, evidence_data: bytes, manifest: dict[str, Any]
) -> Written:
    """``write_outputs`` for bytes made elsewhere (a conversation population's)."""
    digest = hashlib.sha256(data).hexdigest()
    evidence = directory / EVIDENCE_FILE
    write_bytes_atomic(evidence, evidence_data)
    manifest_path = directory / MANIFEST_FILE
    document = {**manifest, "population_sha256": digest}
    write_bytes_atomic(
        manifest_path, orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    )
    write_bytes_atomic(directory / POPULATION_SHA_FILE, f"{digest}  {POPULATION_FILE}\n".encode())
    population = directory / POPULATION_FILE
    write_bytes_atomic(population, data)
    return Written(population, digest, evidence, manifest_path)


def remove_stale(directory: Path) -> None:
    """Before a run: an old population must not survive a failed new one."""
    for name in (POPULATION_FILE, POPULATION_SHA_FILE, EVIDENCE_FILE, MANIFEST_FILE):
        remove_file(directory / name)

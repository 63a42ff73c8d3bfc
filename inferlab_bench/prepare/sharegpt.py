"""Reading ShareGPT records: a JSON array (the catalogued file) or JSONL of the same records."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from inferlab_bench.errors import DatasetError

SourceFormat = Literal["json-array", "jsonl"]


@dataclass(frozen=True)
class SourceRecords:
    """The records of one source file, in file order, and which format was read."""

    records: list[Any]
    source_format: SourceFormat


def detect_format(head: bytes) -> SourceFormat:
    return "json-array" if head.lstrip()[:1] == b"[" else "jsonl"


def read_records(path: Path) -> SourceRecords:
    """Parse the whole file with orjson (the bytes are released as soon as it is parsed)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the dataset ({exc.strerror or exc})") from exc
    fmt = detect_format(data[:64])
    records = _parse_array(path, data) if fmt == "json-array" else _parse_lines(path, data)
    return SourceRecords(records, fmt)


def _parse_array(path: Path, data: bytes) -> list[Any]:
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DatasetError(
            f"{path}: not valid JSON ({exc})", hint="the file is truncated or not ShareGPT"
        ) from exc
    if not isinstance(parsed, list):
        raise DatasetError(
            f"{path}: expected a JSON array of conversations, found {type(parsed).__name__}"
        )
    return parsed


def _parse_lines(path: Path, data: bytes) -> list[Any]:
    records = []
    for number, line in enumerate(data.split(b"\n"), 1):
        if line.strip():
            try:
                records.append(orjson.loads(line))
            except orjson.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{number}: not a JSON record ({exc})") from exc
    return records

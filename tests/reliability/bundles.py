"""Crafted bundles: a real bundle's members changed the way a hostile publisher would.

Each variant takes the members of a real bundle (made by ``bundle`` from a real sweep) and
returns the entries of a new archive: hand-edited BUNDLE.json fields (usually re-signed, so
the digests all match), escaping or odd members, lying result files, damaged records.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

INDEX = "BUNDLE.json"
C1 = "run/01-c1"
C2 = "run/02-c2"


@dataclass(frozen=True)
class Entry:
    name: str
    data: bytes = b""
    kind: bytes = tarfile.REGTYPE
    link: str = ""
    size: int | None = None
    """A header size other than ``len(data)`` (a member that claims more than it holds)."""


Entries = list[Entry]


def read_entries(bundle: Path) -> Entries:
    with tarfile.open(bundle) as tar:
        return [Entry(i.name, tar.extractfile(i).read()) for i in tar]  # type: ignore[union-attr]


def write_archive(path: Path, entries: Entries) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.type = entry.kind
            info.linkname = entry.link
            info.mode = 0o644
            if entry.kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                info.devmajor, info.devminor = 1, 3
            if entry.kind == tarfile.REGTYPE:
                info.size = len(entry.data) if entry.size is None else entry.size
                data = io.BytesIO(entry.data) if entry.size is None else None
                tar.addfile(info, data)
            else:
                tar.addfile(info)
    path.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return path


def index_of(entries: Entries) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_get(entries, INDEX))
    return loaded


def resign(entries: Entries) -> Entries:
    """BUNDLE.json's digests and sizes made to match the members again (a careful liar)."""
    index = index_of(entries)
    present = {e.name: e.data for e in entries if e.kind == tarfile.REGTYPE}
    for member in index.get("members", []):
        if isinstance(member, dict) and member.get("path") in present:
            data = present[member["path"]]
            member["sha256"], member["size"] = hashlib.sha256(data).hexdigest(), len(data)
    return set_index(entries, index)


def set_index(entries: Entries, index: Any) -> Entries:
    return put(entries, INDEX, json.dumps(index).encode())


def put(entries: Entries, name: str, data: bytes) -> Entries:
    return [replace(e, data=data) if e.name == name else e for e in entries]


def add(entries: Entries, entry: Entry, *, listed: bool = True) -> Entries:
    """Append a member (listed in BUNDLE.json with its true digest unless ``listed`` is False)."""
    out = [*entries, entry]
    if listed and entry.kind == tarfile.REGTYPE:
        index = index_of(out)
        index["members"].append(
            {
                "path": entry.name,
                "sha256": hashlib.sha256(entry.data).hexdigest(),
                "size": len(entry.data),
            }
        )
        out = set_index(out, index)
    return out


def _get(entries: Entries, name: str) -> bytes:
    return next(e.data for e in entries if e.name == name)


def edit_index(change: Callable[[dict[str, Any]], Any]) -> Callable[[Entries], Entries]:
    def craft(entries: Entries) -> Entries:
        index = index_of(entries)
        change(index)  # in place; what it returns is ignored
        return set_index(entries, index)

    return craft


def edit_json(name: str, change: Callable[[dict[str, Any]], Any]) -> Callable[[Entries], Entries]:
    """Change one JSON member and re-sign: every digest in BUNDLE.json matches."""

    def craft(entries: Entries) -> Entries:
        document = json.loads(_get(entries, name))
        change(document)  # in place
        data = json.dumps(document).encode()
        return resign(put(entries, name, data))

    return craft


def edit_bytes(name: str, change: Callable[[bytes], bytes]) -> Callable[[Entries], Entries]:
    def craft(entries: Entries) -> Entries:
        return resign(put(entries, name, change(_get(entries, name))))

    return craft


def edit_records(name: str, change: Callable[[pa.Table], pa.Table]) -> Callable[[Entries], Entries]:
    def craft(entries: Entries) -> Entries:
        table = change(pq.read_table(pa.BufferReader(_get(entries, name))))
        sink = io.BytesIO()
        pq.write_table(table, sink)
        return resign(put(entries, name, sink.getvalue()))

    return craft


def scale_column(column: str, factor: float) -> Callable[[pa.Table], pa.Table]:
    def change(table: pa.Table) -> pa.Table:
        index = table.column_names.index(column)
        values = [None if v is None else v * factor for v in table.column(column).to_pylist()]
        return table.set_column(index, column, pa.array(values, type=pa.float64()))

    return change


def zeros_gzip(
    path: Path,
    size: int,
    name: str,
    *,
    listed_size: int | None = None,
    index_size: int | None = None,
) -> Path:
    """A gzip bomb: a valid-looking index listing one member of ``size`` zero bytes; about
    ``size / 1000`` bytes on disk. Gzip members may be concatenated, so one compressed block of
    zeros is written again and again (the test never holds the expanded bytes)."""
    index = {
        "schema_name": "inferlab-bundle-v1",
        "schema_version": 1,
        "cases": [{"path": "run", "label": "c=1", "trials": ["run"], "reset": None}],
        "population": None,
        "members": [
            {"path": name, "sha256": "0" * 64, "size": size if listed_size is None else listed_size}
        ],
    }
    blob = json.dumps(index).encode()
    head = tarfile.TarInfo(INDEX)
    head.size = len(blob) if index_size is None else index_size
    member = tarfile.TarInfo(name)
    member.size = size
    block = 64 * 1024**2
    first = head.tobuf(tarfile.PAX_FORMAT) + blob + b"\0" * (-len(blob) % 512)
    if index_size is not None:
        first = head.tobuf(tarfile.PAX_FORMAT)
        size, block = index_size, 64 * 1024**2
    else:
        first += member.tobuf(tarfile.PAX_FORMAT)
    zeros = gzip.compress(b"\0" * block, compresslevel=9, mtime=0)
    with path.open("wb") as out:
        out.write(gzip.compress(first, mtime=0))
        for _ in range(size // block):
            out.write(zeros)
        out.write(gzip.compress(b"\0" * (size % block + 1024), mtime=0))
    return path

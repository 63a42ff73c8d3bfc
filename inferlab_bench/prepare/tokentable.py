"""The token table as plain columns, and its file: read without numpy or pyarrow.

A warm preparation reads the table, applies the census, selects, and reads back a few rows;
importing numpy and pyarrow took longer than all of that (0.11 s on this 2-core host against
0.04 s for the rest of the table's work). So the table a preparation works with is columns of
Python ints and strings, and the cache keeps it in a file of its own rather than Parquet:

- a first line ``inferlab-token-table <version>``;
- a header line (JSON): the row count, then each column's name, kind and byte length;
- the columns, one after the other: integer columns little-endian (``array`` type codes
  ``q`` and ``i``), string columns as one JSON array (``null`` where there is no value).

A file that does not read back as exactly that (another version, a short or long payload, a
column missing or of another kind) is ``TableFileError``: the cache treats it as absent and
the table is rebuilt. Building the table (``table``) still uses Arrow, in its workers.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import orjson

VERSION = 1
MAGIC = f"inferlab-token-table {VERSION}\n".encode()
INT_COLUMNS = {
    "index": "q",
    "end": "i",
    "total_messages": "i",
    "input_tokens": "i",
    "target_tokens": "i",
    "record_start": "q",
    "record_stop": "q",
}
"""Integer columns and their ``array`` type code (8 or 4 bytes)."""
STRING_COLUMNS = ("source_id", "reason")


class TableFileError(ValueError):
    """The bytes are not a token table file of this version: what is wrong."""


@dataclass(frozen=True)
class TokenTable:
    """One row per record of the source, in file order (see ``table`` for what each holds);
    a count no decision needed is ``materialize.UNCOUNTED``."""

    index: list[int]
    source_id: list[str]
    reason: list[str | None]
    end: list[int]
    total_messages: list[int]
    input_tokens: list[int]
    target_tokens: list[int]
    record_start: list[int]
    record_stop: list[int]

    def __post_init__(self) -> None:
        lengths = {len(getattr(self, f.name)) for f in fields(self)}
        if len(lengths) > 1:
            raise TableFileError(f"columns of different lengths: {sorted(lengths)}")

    @property
    def num_rows(self) -> int:
        return len(self.index)

    def with_counts(
        self, positions: Sequence[int], inputs: Sequence[int], targets: Sequence[int]
    ) -> TokenTable | None:
        """This table with the rows at ``positions`` given these counts, or None when it
        already holds exactly them."""
        old_inputs, old_targets = self.input_tokens, self.target_tokens
        if all(
            old_inputs[p] == i and old_targets[p] == t
            for p, i, t in zip(positions, inputs, targets, strict=True)
        ):
            return None
        new_inputs, new_targets = list(old_inputs), list(old_targets)
        for p, i, t in zip(positions, inputs, targets, strict=True):
            new_inputs[p], new_targets[p] = i, t
        return replace(self, input_tokens=new_inputs, target_tokens=new_targets)

    def to_bytes(self) -> bytes:
        parts: list[bytes] = []
        layout: list[list[Any]] = []
        for name, code in INT_COLUMNS.items():
            column = array(code, getattr(self, name))
            if sys.byteorder == "big":
                column.byteswap()
            parts.append(column.tobytes())
            layout.append([name, code, len(parts[-1])])
        strings = orjson.dumps({name: getattr(self, name) for name in STRING_COLUMNS})
        parts.append(strings)
        layout.append(["strings", "json", len(strings)])
        header = orjson.dumps({"rows": self.num_rows, "columns": layout})
        return MAGIC + header + b"\n" + b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes) -> TokenTable:
        if not data.startswith(MAGIC):
            raise TableFileError(f"not a token table file of version {VERSION}")
        newline = data.find(b"\n", len(MAGIC))
        if newline < 0:
            raise TableFileError("the header is cut short")
        rows, layout = _header(data[len(MAGIC) : newline])
        view, at = memoryview(data), newline + 1
        values: dict[str, Any] = {}
        for name, code, size in layout:
            chunk = view[at : at + size]
            at += size
            if len(chunk) != size:
                raise TableFileError(f"column {name!r} is cut short")
            if code == "json":
                values.update(_strings(chunk, rows))
                continue
            column = array(code)
            if size != rows * column.itemsize:
                raise TableFileError(f"column {name!r}: {size} bytes for {rows} rows")
            column.frombytes(chunk)
            if sys.byteorder == "big":
                column.byteswap()
            values[name] = column.tolist()
        if at != len(data):
            raise TableFileError(f"{len(data) - at} bytes past the last column")
        return cls(**values)


def _header(line: bytes) -> tuple[int, list[tuple[str, str, int]]]:
    """The row count and the columns' (name, kind, byte length), as this version writes."""
    try:
        header = orjson.loads(line)
        rows, layout = header["rows"], [(n, c, size) for n, c, size in header["columns"]]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise TableFileError(f"unreadable header ({exc})") from exc
    expected = [*INT_COLUMNS.items(), ("strings", "json")]
    sizes = [size for *_, size in layout]
    if [(n, c) for n, c, _ in layout] != expected:
        raise TableFileError("the header does not list this version's columns")
    if not (type(rows) is int and rows >= 0 and all(type(n) is int and n >= 0 for n in sizes)):
        raise TableFileError("the header's row count or byte lengths are not counts")
    return rows, layout


def _strings(chunk: memoryview, rows: int) -> dict[str, list[str | None]]:
    try:
        found = orjson.loads(chunk)
    except orjson.JSONDecodeError as exc:
        raise TableFileError(f"string columns: {exc}") from exc
    if not isinstance(found, dict) or sorted(found) != sorted(STRING_COLUMNS):
        raise TableFileError("string columns: expected source_id and reason")
    for name, column in found.items():
        if not isinstance(column, list) or len(column) != rows:
            raise TableFileError(f"column {name!r}: expected {rows} values")
    if not set(map(type, found["source_id"])) <= {str}:
        raise TableFileError("column 'source_id': expected strings")
    if not set(map(type, found["reason"])) <= {str, type(None)}:
        raise TableFileError("column 'reason': expected strings or null")
    return found

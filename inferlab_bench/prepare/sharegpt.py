"""Reading ShareGPT records: a JSON array (the catalogued file) or JSONL of the same records.

The file's bytes are read once and kept; each record is parsed when it is read (see
``spans``), so memory stays near the file's size instead of three times it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import orjson

from inferlab_bench.errors import DatasetError

if TYPE_CHECKING:
    from inferlab_bench.prepare.spans import Spans

SourceFormat = Literal["json-array", "jsonl"]


class Records(Sequence[Any]):
    """The records of one source file in file order, each parsed when it is read."""

    def __init__(self, path: Path, data: bytes, spans: Spans) -> None:
        self._path = path
        self._view = memoryview(data)  # slices without copies; keeps ``data`` alive
        self._spans = spans

    def __len__(self) -> int:
        return len(self._spans)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        start, end = int(self._spans.starts[index]), int(self._spans.ends[index])
        try:
            return orjson.loads(self._view[start:end])
        except orjson.JSONDecodeError as exc:
            raise DatasetError(
                f"{self._path}: {self._where(index)} is not valid JSON ({exc}); "
                "the file is corrupt or not ShareGPT"
            ) from exc

    def span(self, index: int) -> tuple[int, int]:
        """The byte range ``[start, stop)`` of record ``index`` in the file."""
        return int(self._spans.starts[index]), int(self._spans.ends[index])

    def _where(self, index: int) -> str:
        if self._spans.lines is not None:
            return f"line {int(self._spans.lines[index])}"
        return f"record {index} (byte {int(self._spans.starts[index])})"


@dataclass(frozen=True)
class SourceRecords:
    """The records of one source file, in file order, and which format was read."""

    records: Records
    source_format: SourceFormat


def read_spans(path: Path, spans: Sequence[tuple[int, int]]) -> list[Any]:
    """Parse the records at these byte ranges of ``path`` (the few a population needs)."""
    records = []
    try:
        with path.open("rb") as handle:
            for start, stop in spans:
                handle.seek(start)
                records.append(orjson.loads(handle.read(stop - start)))
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the dataset ({exc.strerror or exc})") from exc
    except orjson.JSONDecodeError as exc:
        raise DatasetError(f"{path}: a record changed since it was tokenized ({exc})") from exc
    return records


def detect_format(head: bytes) -> SourceFormat:
    return "json-array" if head.lstrip()[:1] == b"[" else "jsonl"


def read_records(path: Path) -> SourceRecords:
    """Read the file and find its records; structural damage is a DatasetError here, a
    record that does not parse is one when it is read."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the dataset ({exc.strerror or exc})") from exc
    from inferlab_bench.prepare.spans import SpanError, array_spans, line_spans  # numpy

    fmt = detect_format(data[:64])
    try:
        spans = array_spans(data) if fmt == "json-array" else line_spans(data)
    except SpanError as exc:
        raise DatasetError(
            f"{path}: not valid JSON ({exc})", hint="the file is truncated or not ShareGPT"
        ) from exc
    return SourceRecords(Records(path, data, spans), fmt)

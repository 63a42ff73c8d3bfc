"""Fast, lenient reading of AIPerf's outputs: per-request records as columns, summary, manifest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from inferlab_bench.errors import RecordsError
from inferlab_bench.metric_tags import CHUNK_GAPS, ITL, RECORD_TAGS
from inferlab_bench.validity.read_bursts import FIRST_SHARE, STALL_SHARE, burst_lateness

_VALUE = pa.struct([("value", pa.float64())])
# Only the fields we use: everything else in a record is skipped by the parser.
RECORD_SCHEMA = pa.schema(
    [
        (
            "metadata",
            pa.struct(
                [
                    ("session_num", pa.int64()),
                    ("conversation_id", pa.string()),
                    ("turn_index", pa.int64()),
                    ("x_request_id", pa.string()),
                    ("credit_issued_ns", pa.int64()),
                    ("request_start_ns", pa.int64()),
                    ("request_end_ns", pa.int64()),
                    ("benchmark_phase", pa.string()),
                    ("was_cancelled", pa.bool_()),
                    ("worker_id", pa.string()),
                ]
            ),
        ),
        (
            "metrics",
            pa.struct(
                [(tag, _VALUE) for tag in RECORD_TAGS]
                + [(CHUNK_GAPS, pa.struct([("value", pa.list_(pa.float64()))]))]
            ),
        ),
        (
            "error",
            pa.struct([("code", pa.int64()), ("type", pa.string()), ("message", pa.string())]),
        ),
    ]
)
_BLOCK_SIZE = 4 << 20


@dataclass(frozen=True)
class RecordColumns:
    """One phase's records as aligned columns; NaN / -1 / None mark absent values."""

    session_num: np.ndarray
    conversation_id: list[str | None]
    x_request_id: list[str | None]
    credit_issued_ns: np.ndarray
    """When AIPerf's scheduler issued the credit to send (the planned send time)."""
    start_ns: np.ndarray
    end_ns: np.ndarray
    was_cancelled: np.ndarray
    has_error: np.ndarray
    error_message: list[str | None]
    metrics: dict[str, np.ndarray]
    error_code: np.ndarray | None = None
    """AIPerf's ``error.code`` (an HTTP status for a non-2xx answer); -1 where absent."""
    error_type: list[str | None] | None = None
    """AIPerf's ``error.type``: the exception class name, or the HTTP reason phrase."""
    worker_id: list[str | None] | None = None
    """The AIPerf worker that sent each request (``metadata.worker_id``)."""
    turn_index: np.ndarray | None = None
    """The turn of its session each request was (``metadata.turn_index``; -1 where absent)."""
    first_burst_ms: np.ndarray | None = None
    """Per request, how late at least its first token was read (``read_bursts``; NaN where
    AIPerf kept no chunk gaps)."""
    largest_burst_ms: np.ndarray | None = None
    """Per request, the largest burst anywhere in its stream (``read_bursts``)."""

    def __len__(self) -> int:
        return int(self.session_num.shape[0])

    def metric(self, tag: str) -> np.ndarray:
        return self.metrics[tag]

    def reports(self, tag: str) -> bool:
        """True when at least one record carries ``tag``."""
        return bool(np.any(~np.isnan(self.metrics[tag])))


@dataclass(frozen=True)
class CaseRecords:
    """The records file split by benchmark phase."""

    warmup: RecordColumns
    profiling: RecordColumns


def read_records(path: Path) -> CaseRecords:
    """Parse ``PREFIX.jsonl``; a corrupt line is a RecordsError naming its line number."""
    if not path.is_file():
        raise RecordsError(f"{path}: AIPerf wrote no records file", hint="see the AIPerf log")
    table = _read_table(path)
    phases = pc.struct_field(table.column("metadata").combine_chunks(), "benchmark_phase")
    return CaseRecords(
        warmup=_columns(table.filter(pc.equal(phases, "warmup"))),
        profiling=_columns(table.filter(pc.equal(phases, "profiling"))),
    )


def read_json_file(path: Path, what: str) -> dict[str, Any]:
    """Read one JSON object written by AIPerf (summary, phase manifest)."""
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise RecordsError(f"{path}: AIPerf wrote no {what}", hint="see the AIPerf log") from exc
    except (OSError, orjson.JSONDecodeError) as exc:
        raise RecordsError(f"{path}: {what} is unreadable ({exc})") from exc
    if not isinstance(data, dict):
        raise RecordsError(f"{path}: {what} is not a JSON object")
    return data


def _read_table(path: Path) -> pa.Table:
    """The records, each block's chunk-gap lists reduced to two figures per request as it is
    read: the lists are most of a long stream's record and are not kept."""
    if path.stat().st_size == 0:
        return _TABLE_SCHEMA.empty_table()
    options = pj.ParseOptions(explicit_schema=RECORD_SCHEMA, unexpected_field_behavior="ignore")
    try:
        reader = pj.open_json(
            path, parse_options=options, read_options=pj.ReadOptions(block_size=_BLOCK_SIZE)
        )
        return _with_bursts([_reduced(batch) for batch in reader])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise _locate_corruption(path, exc) from exc


_KEPT_METRICS = pa.struct([(tag, _VALUE) for tag in RECORD_TAGS])
_TABLE_SCHEMA = pa.schema(
    [
        RECORD_SCHEMA.field("metadata"),
        pa.field("metrics", _KEPT_METRICS),
        RECORD_SCHEMA.field("error"),
        pa.field("first_burst_ms", pa.float64()),
        pa.field("largest_burst_ms", pa.float64()),
    ]
)


def _with_bursts(batches: list[pa.RecordBatch]) -> pa.Table:
    if not batches:
        return _TABLE_SCHEMA.empty_table()
    return pa.Table.from_batches(batches, schema=_TABLE_SCHEMA)


def _reduced(batch: pa.RecordBatch) -> pa.RecordBatch:
    metrics = batch.column("metrics")
    gaps = pc.struct_field(metrics, [CHUNK_GAPS, "value"])
    lengths = np.asarray(pc.fill_null(pc.list_value_length(gaps), 0), dtype=np.int64)
    values = np.asarray(pc.list_flatten(gaps).to_numpy(zero_copy_only=False), dtype=np.float64)
    itl = _floats(pc.struct_field(metrics, [ITL, "value"]))
    first, _ = burst_lateness(lengths, values, itl, FIRST_SHARE)
    _, largest = burst_lateness(lengths, values, itl, STALL_SHARE)
    kept = pa.StructArray.from_arrays(
        [pc.struct_field(metrics, tag) for tag in RECORD_TAGS],
        fields=list(_KEPT_METRICS),
        mask=pc.invert(metrics.is_valid()),
    )
    return pa.RecordBatch.from_arrays(
        [batch.column("metadata"), kept, batch.column("error"), pa.array(first), pa.array(largest)],
        schema=_TABLE_SCHEMA,
    )


def _locate_corruption(path: Path, exc: Exception) -> RecordsError:
    # Arrow does not say which line failed; a slow scan only on the error path does.
    with path.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as err:
                return RecordsError(f"{path}:{number}: corrupt record ({err})")
            problem = _shape_problem(record)
            if problem:
                return RecordsError(f"{path}:{number}: unexpected record ({problem})")
    return RecordsError(f"{path}: records cannot be read ({exc})")


def _shape_problem(record: Any) -> str | None:
    if not isinstance(record, dict):
        return "not a JSON object"
    if not isinstance(record.get("metadata"), dict):
        return "no metadata object"
    return None


def _columns(table: pa.Table) -> RecordColumns:
    meta = table.column("metadata").combine_chunks()
    metrics = table.column("metrics").combine_chunks()
    error = table.column("error").combine_chunks()
    return RecordColumns(
        session_num=_ints(pc.struct_field(meta, "session_num")),
        conversation_id=pc.struct_field(meta, "conversation_id").to_pylist(),
        x_request_id=pc.struct_field(meta, "x_request_id").to_pylist(),
        credit_issued_ns=_ints(pc.struct_field(meta, "credit_issued_ns")),
        start_ns=_ints(pc.struct_field(meta, "request_start_ns")),
        end_ns=_ints(pc.struct_field(meta, "request_end_ns")),
        was_cancelled=_bools(pc.struct_field(meta, "was_cancelled")),
        has_error=np.asarray(error.is_valid(), dtype=bool),
        error_message=pc.struct_field(error, "message").to_pylist(),
        error_code=_ints(pc.struct_field(error, "code")),
        error_type=pc.struct_field(error, "type").to_pylist(),
        worker_id=pc.struct_field(meta, "worker_id").to_pylist(),
        turn_index=_ints(pc.struct_field(meta, "turn_index")),
        metrics={tag: _floats(pc.struct_field(metrics, [tag, "value"])) for tag in RECORD_TAGS},
        first_burst_ms=_floats(table.column("first_burst_ms").combine_chunks()),
        largest_burst_ms=_floats(table.column("largest_burst_ms").combine_chunks()),
    )


def _ints(array: pa.Array) -> np.ndarray:
    # -1 marks a missing integer; callers check for it.
    return np.asarray(pc.fill_null(array, -1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _floats(array: pa.Array) -> np.ndarray:
    return np.asarray(
        pc.fill_null(array.cast(pa.float64()), np.nan).to_numpy(zero_copy_only=False),
        dtype=np.float64,
    )


def _bools(array: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False), dtype=bool)

"""Run one case and save it as a run directory: request.json, result.json, records.parquet."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from inferlab_bench.atomic import atomic_writer, write_bytes_atomic
from inferlab_bench.case.engine import LoadEngine
from inferlab_bench.case.records import RecordColumns, read_records
from inferlab_bench.case.stage import CaseOptions, run_case
from inferlab_bench.errors import RecordsError
from inferlab_bench.layout import RECORDS_PARQUET, REQUEST_FILE, RESULT_FILE
from inferlab_bench.metric_tags import MS_NAME
from inferlab_bench.protocol import BenchClientRequest, BenchClientResult, dump_json
from inferlab_bench.report.rundir import SavedCase, load_case


def run_and_save(
    request: BenchClientRequest, options: CaseOptions, engine: LoadEngine | None = None
) -> SavedCase:
    """Run the case into ``request.artifact_dir`` and save its request and result there."""
    directory = request.artifact_dir
    directory.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(directory / REQUEST_FILE, dump_json(request))
    result = run_case(request, options, engine)
    write_bytes_atomic(directory / RESULT_FILE, dump_json(result))
    export_records(directory, result)
    return load_case(directory)


def records_path(result: BenchClientResult) -> Path | None:
    paths = [a.path for a in result.raw_artifacts if a.kind == "records"]
    return paths[0] if paths and paths[0].is_file() else None


def export_records(directory: Path, result: BenchClientResult) -> Path | None:
    """Per-request profiling records as Parquet (for pandas / duckdb); None if there are none."""
    path = records_path(result)
    if path is None:
        return None
    try:
        columns = read_records(path).profiling
    except RecordsError:
        return None  # the result already says why; nothing trustworthy to export
    target = directory / RECORDS_PARQUET
    with atomic_writer(target) as handle:
        pq.write_table(records_table(columns), handle)
    return target


def records_table(columns: RecordColumns) -> pa.Table:
    """One row per profiling request; latencies in milliseconds, NaN where not reported."""
    data: dict[str, object] = {
        "session_num": columns.session_num,
        "conversation_id": columns.conversation_id,
        "request_start_ns": columns.start_ns,
        "request_end_ns": columns.end_ns,
        "was_cancelled": columns.was_cancelled,
        "has_error": columns.has_error,
        "error_message": columns.error_message,
    }
    for tag, values in columns.metrics.items():
        data[MS_NAME.get(tag, tag)] = np.asarray(values, dtype=np.float64)
    return pa.table(data)

"""A bundle's result.json recomputed from its own records.parquet, with the case stage's code.

What a result claims is checked against what the bundle holds before it is shown: the request
counts, every latency statistic (AIPerf's summary is numpy's linear percentiles and population
standard deviation over the completed requests, so these agree to rounding), the SLO evidence
(recomputed by ``case.slo``, the code the case stage runs), the output tokens per request behind
the two throughputs, and the request throughput against the records' own request window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from inferlab_bench import metric_tags as tags
from inferlab_bench.case import slo
from inferlab_bench.case.metrics import STATISTICS
from inferlab_bench.case.records import RecordColumns
from inferlab_bench.errors import BundleError, InferlabError
from inferlab_bench.layout import RECORDS_PARQUET, RESULT_FILE, VALIDITY_FILE
from inferlab_bench.protocol import BenchClientRequest, BenchClientResult, ClientStatus
from inferlab_bench.publish.evidence import member_model
from inferlab_bench.validity.report import VALIDITY_SCHEMA, ValidityDocument

RELATIVE = 1e-6
"""Figures recomputed from the same numbers agree to float rounding; this is far above it."""
WINDOW_SLACK = 0.25
"""AIPerf divides by its phase's duration, a little longer than the records' request window
(measured 0.2-2.5% on 12-request cases); a chosen bound that a lie of 2x cannot pass."""
COLUMNS: dict[str, pa.DataType] = {
    "session_num": pa.int64(),
    "request_start_ns": pa.int64(),
    "request_end_ns": pa.int64(),
    "was_cancelled": pa.bool_(),
    "has_error": pa.bool_(),
    **{name: pa.float64() for name in tags.LATENCIES_MS},
    tags.OUTPUT_TOKENS: pa.float64(),
    tags.GOOD_REQUEST_COUNT: pa.float64(),
}


def check_trial(
    where: Path, trial: str, members: Mapping[str, bytes], request: BenchClientRequest
) -> bool:
    """Refuse a trial whose result.json differs from its records; False when it has none."""
    name = f"{trial}/{RESULT_FILE}"
    result = member_model(where, name, members[name], BenchClientResult)
    _check_validity(where, f"{trial}/{VALIDITY_FILE}", members)
    records_name = f"{trial}/{RECORDS_PARQUET}"
    if records_name not in members:
        return False
    records = read_parquet(where, records_name, members[records_name])
    if result.status is not ClientStatus.SUCCEEDED:
        return True
    try:
        problem = figures_problem(result, records, request)
    except InferlabError as exc:
        problem = exc.message
    if problem is not None:
        raise BundleError(
            f"{where}: {name} does not match {records_name}: {problem}",
            hint="the result was edited after the run; only figures its records support count",
        )
    return True


def _check_validity(where: Path, name: str, members: Mapping[str, bytes]) -> None:
    """validity.json, when there, is a validity document (the page and report read it)."""
    if name not in members:
        return
    try:
        document = orjson.loads(members[name])
    except orjson.JSONDecodeError as exc:
        raise BundleError(f"{where}: member {name} is not JSON ({exc})") from exc
    if not isinstance(document, dict) or document.get("schema_name") != VALIDITY_SCHEMA:
        raise BundleError(f"{where}: member {name} is not an {VALIDITY_SCHEMA} document")
    member_model(where, name, members[name], ValidityDocument)


def read_parquet(where: Path, name: str, data: bytes) -> RecordColumns:
    """records.parquet read back into the case stage's columns, its schema checked first."""
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise BundleError(f"{where}: member {name} is not a readable Parquet file ({exc})") from exc
    for column, kind in COLUMNS.items():
        if column not in table.column_names:
            raise BundleError(f"{where}: member {name} has no column {column!r}")
        found = table.schema.field(column).type
        if found != kind and not (kind == pa.float64() and found == pa.null()):
            raise BundleError(f"{where}: member {name} column {column!r} is {found}, not {kind}")
        if kind != pa.float64() and table.column(column).null_count:
            raise BundleError(f"{where}: member {name} column {column!r} has empty values")
    return _columns(table)


def _columns(table: pa.Table) -> RecordColumns:
    def array(column: str, kind: type) -> np.ndarray:
        values = table.column(column).to_numpy(zero_copy_only=False)
        return np.asarray(values, dtype=kind)

    rows = table.num_rows
    metrics = {tags.LATENCIES_MS[n]: array(n, np.float64) for n in tags.LATENCIES_MS}
    metrics |= {t: array(t, np.float64) for t in (tags.OUTPUT_TOKENS, tags.GOOD_REQUEST_COUNT)}
    return RecordColumns(
        session_num=array("session_num", np.int64),
        conversation_id=[None] * rows,
        x_request_id=[None] * rows,
        credit_issued_ns=np.full(rows, -1, dtype=np.int64),
        start_ns=array("request_start_ns", np.int64),
        end_ns=array("request_end_ns", np.int64),
        was_cancelled=array("was_cancelled", bool),
        has_error=array("has_error", bool),
        error_message=[None] * rows,
        metrics=metrics,
    )


def figures_problem(
    result: BenchClientResult, records: RecordColumns, request: BenchClientRequest
) -> str | None:
    """The first figure of ``result`` its records do not give (None when all agree)."""
    slo.check_profiling_records(records)
    completed_mask = ~(records.has_error | records.was_cancelled)
    completed = int(completed_mask.sum())
    if (result.completed_requests, result.failed_requests) != (completed, len(records) - completed):
        return (
            f"it says {result.completed_requests} completed and {result.failed_requests} "
            f"failed, the records {completed} and {len(records) - completed}"
        )
    expected: dict[str, float] = {}
    for name, tag in tags.LATENCIES_MS.items():
        if f"p50_{name}" in result.metrics:
            values = records.metric(tag)[completed_mask]
            if values.size == 0 or not np.all(np.isfinite(values)) or np.any(values < 0):
                return f"{name}: the records hold no finite, non-negative values for it"
            expected |= _statistics(name, values)
    if request.definition.request_slo is not None and result.request_slo is not None:
        evidence = slo.slo_result(
            records,
            request_count=request.case.request_count,
            native_good_count=result.request_slo.native_aggregate_good_request_count,
        )
        if evidence.good_requests != result.request_slo.good_requests:
            said = result.request_slo.good_requests
            return f"good_requests is {said}, the records give {evidence.good_requests}"
        expected |= {"goodput": evidence.goodput, "good_request_ratio": evidence.good_request_ratio}
    for key, value in expected.items():
        claimed = result.metrics.get(key)
        if claimed is None or not math.isclose(claimed, value, rel_tol=RELATIVE, abs_tol=1e-9):
            return f"{key} is {claimed}, the records give {value:.6g}"
    return _throughput_problem(result.metrics, records, completed_mask)


def _statistics(name: str, values: np.ndarray) -> dict[str, float]:
    computed = {
        "mean": float(values.mean()),
        "min": float(values.min()),
        "max": float(values.max()),
        "stddev": float(values.std()),
        **{p: float(np.percentile(values, float(p[1:]))) for p in STATISTICS if p.startswith("p")},
    }
    return {f"{stat}_{name}": computed[stat] for stat in STATISTICS}


def _throughput_problem(
    metrics: Mapping[str, float], records: RecordColumns, completed_mask: np.ndarray
) -> str | None:
    completed = int(completed_mask.sum())
    rate, output = metrics.get("request_throughput"), metrics.get("output_throughput")
    if completed == 0 or rate is None or output is None:
        return None
    tokens = records.metric(tags.OUTPUT_TOKENS)[completed_mask]
    if np.all(np.isfinite(tokens)) and rate > 0:
        per_request = float(tokens.sum()) / completed
        if not math.isclose(output / rate, per_request, rel_tol=RELATIVE):
            return (
                f"output_throughput / request_throughput is {output / rate:.6g} tokens per "
                f"request, the records hold {per_request:.6g}"
            )
    window = slo.window_seconds(records)
    if window > 0:
        window_rate = completed / window
        if not (1 - WINDOW_SLACK) * window_rate <= rate <= (1 + WINDOW_SLACK) * window_rate:
            return (
                f"request_throughput is {rate:.6g}/s, the records' request window gives "
                f"{window_rate:.6g}/s (more than {WINDOW_SLACK:.0%} apart)"
            )
    return None

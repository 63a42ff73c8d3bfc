"""Pure SLO evidence from the per-request profiling records (not AIPerf's aggregate)."""

from __future__ import annotations

import numpy as np

from inferlab_bench import metric_tags as tags
from inferlab_bench.case.records import RecordColumns
from inferlab_bench.errors import RecordsError
from inferlab_bench.protocol import BenchRequestSloResult

DURATION_SOURCE = "native-profiling-request-window"


def check_profiling_records(records: RecordColumns) -> None:
    """Every profiling record: a unique session number and integer start <= end nanoseconds."""
    sessions = records.session_num
    if np.any(sessions < 0):
        raise RecordsError(f"profiling record {_first(sessions < 0)}: no session number")
    unique, counts = np.unique(sessions, return_counts=True)
    if np.any(counts > 1):
        raise RecordsError(
            f"profiling records: session number {int(unique[counts > 1][0])} repeats"
        )
    bad_time = (records.start_ns < 0) | (records.end_ns < 0)
    if np.any(bad_time):
        raise RecordsError(f"profiling record {_first(bad_time)}: missing request start/end ns")
    backwards = records.end_ns < records.start_ns
    if np.any(backwards):
        index = _first(backwards)
        raise RecordsError(
            f"profiling record {index}: request_end_ns {int(records.end_ns[index])} is before "
            f"request_start_ns {int(records.start_ns[index])}"
        )


def good_flags(records: RecordColumns) -> np.ndarray:
    """Per record 0/1: AIPerf's ``good_request_count``; failed or cancelled requests are 0."""
    good = records.metric(tags.GOOD_REQUEST_COUNT)
    failed = records.has_error | records.was_cancelled
    missing = np.isnan(good) & ~failed
    if np.any(missing):
        raise RecordsError(
            f"profiling record {_first(missing)}: no good_request_count although an SLO is set"
        )
    flags = np.where(failed, 0.0, np.nan_to_num(good, nan=0.0))
    if np.any((flags != 0.0) & (flags != 1.0)):
        raise RecordsError(
            f"profiling record {_first((flags != 0) & (flags != 1))}: good_request_count not 0 or 1"
        )
    return flags.astype(np.int64)


def slo_result(
    records: RecordColumns,
    *,
    request_count: int,
    native_good_count: float | None,
) -> BenchRequestSloResult:
    """good / request_count and good per second over the profiling request window."""
    check_profiling_records(records)
    good = int(good_flags(records).sum()) if len(records) else 0
    duration = window_seconds(records)
    native = None if native_good_count is None else int(round(native_good_count))
    return BenchRequestSloResult(
        good_requests=good,
        good_request_ratio=good / request_count if request_count else 0.0,
        goodput=good / duration if duration > 0 else 0.0,
        profiling_duration_seconds=duration,
        profiling_duration_source=DURATION_SOURCE,
        request_count_reconciled=len(records) == request_count,
        native_aggregate_good_request_count=native,
        native_aggregate_good_request_count_consistent=None if native is None else native == good,
    )


def window_seconds(records: RecordColumns) -> float:
    """(max request end - min request start) in seconds; 0 without records."""
    if not len(records):
        return 0.0
    return float(int(records.end_ns.max()) - int(records.start_ns.min())) / 1e9


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])

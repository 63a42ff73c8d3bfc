"""slo: good requests, ratio and goodput over the profiling request window."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferlab_bench.case.records import read_records
from inferlab_bench.case.slo import DURATION_SOURCE, slo_result
from inferlab_bench.errors import RecordsError
from tests.case.support import record, write_records


def profiling(tmp_path: Path, rows: list[dict]) -> object:
    return read_records(write_records(tmp_path / "r.jsonl", rows)).profiling


def test_ratio_goodput_and_native_consistency(tmp_path: Path) -> None:
    rows = [
        record(0, good=1),
        record(1, good=0),
        record(2, error="500", good=None),
        record(3, good=1, cancelled=True),
    ]
    result = slo_result(profiling(tmp_path, rows), request_count=4, native_good_count=1.0)
    # window: first start 1.000 s .. last end 1.003 s + 100 ms
    assert result.good_requests == 1 and result.good_request_ratio == 0.25
    assert result.profiling_duration_seconds == pytest.approx(0.103)
    assert result.goodput == pytest.approx(1 / 0.103)
    assert result.profiling_duration_source == DURATION_SOURCE
    assert result.request_count_reconciled
    assert result.native_aggregate_good_request_count == 1
    assert result.native_aggregate_good_request_count_consistent


def test_every_request_failed_is_a_zero_measurement(tmp_path: Path) -> None:
    rows = [record(i, error="HTTP 500", good=None) for i in range(3)]
    result = slo_result(profiling(tmp_path, rows), request_count=3, native_good_count=None)
    assert result.good_requests == 0 and result.goodput == 0.0 and result.good_request_ratio == 0.0
    assert result.native_aggregate_good_request_count is None


def test_inconsistent_native_count_and_unreconciled_counts(tmp_path: Path) -> None:
    result = slo_result(
        profiling(tmp_path, [record(0), record(1)]), request_count=3, native_good_count=1.0
    )
    assert not result.request_count_reconciled
    assert result.native_aggregate_good_request_count_consistent is False


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([record(0, session=1), record(1, session=1)], "session number 1 repeats"),
        ([record(0, good=None)], "no good_request_count"),
        ([record(0, good=2)], "not 0 or 1"),
        ([record(0, latency_ms=-5.0)], "is before request_start_ns"),
    ],
)
def test_bad_evidence_is_a_records_error(tmp_path: Path, rows: list[dict], message: str) -> None:
    with pytest.raises(RecordsError, match=message):
        slo_result(profiling(tmp_path, rows), request_count=len(rows), native_good_count=None)

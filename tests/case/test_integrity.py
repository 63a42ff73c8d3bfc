"""Case integrity: population identity, warmup completeness, the post-reset cold-start verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferlab_bench.case.integrity import (
    check_population_identity,
    check_warmup_complete,
    cold_start_verdict,
)
from inferlab_bench.case.records import CaseRecords, read_records
from inferlab_bench.errors import RecordsError
from tests.case.support import record, write_records


def load(tmp_path: Path, rows: list[dict]) -> CaseRecords:
    return read_records(write_records(tmp_path / "r.jsonl", rows))


def test_identity_accepts_the_expected_slices_in_any_order(tmp_path: Path) -> None:
    rows = [record(1, phase="warmup"), record(0, phase="warmup"), record(3), record(2)]
    check_population_identity(load(tmp_path, rows), warmup=2, request_count=2)


def test_identity_names_missing_repeated_and_unexpected_entries(tmp_path: Path) -> None:
    rows = [
        record(0, phase="warmup"),
        record(1, session=5),
        record(1, session=6),
        record(9, session=7),
    ]
    with pytest.raises(
        RecordsError,
        match=r"profiling: .*inferlab-00000001\.\.inferlab-00000003.*"
        r"missing inferlab-00000002, inferlab-00000003; unexpected inferlab-00000009; "
        r"repeated inferlab-00000001",
    ):
        check_population_identity(load(tmp_path, rows), warmup=1, request_count=3)


def test_warmup_must_complete_without_errors(tmp_path: Path) -> None:
    records = load(
        tmp_path,
        [record(0, phase="warmup"), record(1, phase="warmup", error="HTTP 500", good=None)],
    )
    with pytest.raises(RecordsError, match=r"warmup: 1 of 2 requests failed \(first: HTTP 500\)"):
        check_warmup_complete(records.warmup, 2)
    with pytest.raises(RecordsError, match="expected 3 records"):
        check_warmup_complete(records.warmup, 3)


def test_cold_start_verdicts(tmp_path: Path) -> None:
    cold = load(
        tmp_path, [record(0, cached=0), record(1, cached=16), record(2, cached=80)]
    ).profiling
    verdict = cold_start_verdict(cold, first_wave=2, shared_prefix_bound=16)
    assert verdict is not None and verdict.cold and verdict.checked_requests == 2
    assert not cold_start_verdict(cold, first_wave=3, shared_prefix_bound=16).cold  # type: ignore[union-attr]
    warm = load(tmp_path, [record(0, cached=32), record(1, cached=0)]).profiling
    verdict = cold_start_verdict(warm, first_wave=2, shared_prefix_bound=None)
    assert (
        verdict is not None
        and not verdict.cold
        and "read 32 cached prompt tokens" in verdict.reason
    )
    unreported = load(tmp_path, [record(0, cached=None)]).profiling
    assert cold_start_verdict(unreported, first_wave=1, shared_prefix_bound=None) is None

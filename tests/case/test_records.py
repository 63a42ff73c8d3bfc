"""records: columns from AIPerf's JSONL, lenient on extra fields, precise about corruption."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inferlab_bench.case.records import LEADING_GAPS, read_json_file, read_records
from inferlab_bench.errors import RecordsError
from tests.case.support import record, write_records


def test_phases_are_split_and_columns_aligned(tmp_path: Path) -> None:
    rows = [
        record(0, phase="warmup"),
        record(1),
        record(2, error="boom", good=None),
        record(3, cached=None),
    ]
    records = read_records(write_records(tmp_path / "profile.jsonl", rows))
    assert len(records.warmup) == 1 and len(records.profiling) == 3
    profiling = records.profiling
    assert profiling.conversation_id == [
        "inferlab-00000001",
        "inferlab-00000002",
        "inferlab-00000003",
    ]
    assert profiling.has_error.tolist() == [False, True, False]
    assert profiling.error_message[1] == "boom"
    assert np.isnan(profiling.metric("time_to_first_token")[1])
    assert profiling.metric("request_latency")[0] == 100.0
    assert np.isnan(profiling.metric("usage_prompt_cache_read_tokens")[2])
    assert profiling.start_ns.dtype == np.int64 and profiling.start_ns[0] == 1_001_000_000
    assert profiling.worker_id == ["worker_1"] * 3  # who sent each: the send time's queue


def test_the_first_chunk_gaps_are_kept_per_request(tmp_path: Path) -> None:
    """AIPerf's inter_chunk_latency list: the first LEADING_GAPS of each, NaN past the end
    (the read-late check counts a first burst in them); a failed request has none."""
    long = record(1)
    long["metrics"]["inter_chunk_latency"]["value"] = [float(i) for i in range(100)]
    rows = [record(0), long, record(2, error="boom", good=None)]
    gaps = read_records(write_records(tmp_path / "profile.jsonl", rows)).profiling.leading_gaps_ms
    assert gaps is not None and gaps.shape == (3, LEADING_GAPS)
    assert gaps[0, :3].tolist() == [5.0, 5.1, 4.9] and np.isnan(gaps[0, 3:]).all()
    assert gaps[1].tolist() == [float(i) for i in range(LEADING_GAPS)]
    assert np.isnan(gaps[2]).all()


def test_a_corrupted_line_names_its_line_number(tmp_path: Path) -> None:
    path = write_records(tmp_path / "profile.jsonl", [record(0), record(1), record(2)])
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1][: len(lines[1]) // 2] + b"\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(RecordsError, match=r"profile.jsonl:2: corrupt record"):
        read_records(path)


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(RecordsError, match="wrote no records file"):
        read_records(tmp_path / "absent.jsonl")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert len(read_records(tmp_path / "empty.jsonl").profiling) == 0
    with pytest.raises(RecordsError, match="wrote no summary"):
        read_json_file(tmp_path / "profile.json", "summary")

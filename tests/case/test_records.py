"""records: columns from AIPerf's JSONL, lenient on extra fields, precise about corruption."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inferlab_bench.case.records import read_json_file, read_records
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


def test_each_stream_s_chunk_gaps_become_its_bursts(tmp_path: Path) -> None:
    """AIPerf's inter_chunk_latency lists are reduced as read: per request the burst that
    opens its stream and the largest anywhere (ITL 5 ms in these records); a failed
    request has neither. The lists themselves are not kept."""
    late = record(1)
    late["metrics"]["inter_chunk_latency"]["value"] = [0.1, 0.2, 5.0, 9.0, 0.5, 5.0]
    rows = [record(0), late, record(2, error="boom", good=None)]
    profiling = read_records(write_records(tmp_path / "profile.jsonl", rows)).profiling
    assert profiling.first_burst_ms is not None and profiling.largest_burst_ms is not None
    assert profiling.first_burst_ms[:2].tolist() == [0.0, pytest.approx(9.7)]
    assert profiling.largest_burst_ms[:2].tolist() == [0.0, pytest.approx(9.7)]
    assert np.isnan(profiling.first_burst_ms[2]) and np.isnan(profiling.largest_burst_ms[2])
    assert "inter_chunk_latency" not in profiling.metrics


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

"""The token-table cache: what it stores comes back; anything damaged is a miss, not an error."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from inferlab_bench.prepare import tokencache
from inferlab_bench.prepare.table import SCHEMA, Row, int_column, take_rows


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _table() -> pa.Table:
    rows = [
        Row(0, "a", "invalid_conversation"),
        Row(1, "b", None, 1, 2, 30, 40, 5, 90),
        Row(2, "row-2", None, 3, 4, 50, 1, 91, 200),
    ]
    batches = [
        pa.RecordBatch.from_pylist([r.__dict__ for r in rows[:2]], schema=SCHEMA),
        pa.RecordBatch.from_pylist([rows[2].__dict__], schema=SCHEMA),
    ]
    return pa.Table.from_batches(batches, schema=SCHEMA)


def test_stored_table_comes_back_and_columns_read_without_copies() -> None:
    path = tokencache.store_table("k1", _table())
    assert path == tokencache.table_path("k1") and path.is_file()
    loaded = tokencache.load_table("k1")
    assert loaded is not None and loaded.equals(_table())
    assert int_column(loaded, "target_tokens").tolist() == [-1, 40, 1]  # across two chunks
    assert int_column(loaded.slice(1), "index").tolist() == [1, 2]  # an offset into a chunk
    assert [row["source_id"] for row in take_rows(loaded, [2, 0])] == ["row-2", "a"]


def test_absent_truncated_foreign_or_null_tables_are_misses() -> None:
    assert tokencache.load_table("absent") is None
    path = tokencache.store_table("k2", _table())
    path.write_bytes(path.read_bytes()[:100])
    assert tokencache.load_table("k2") is None
    other = pa.table({"index": pa.array([1], pa.int64())})
    pq.write_table(other, tokencache.table_path("k3"))
    assert tokencache.load_table("k3") is None
    holed = _table().set_column(6, "target_tokens", pa.array([None, 1, 2], pa.int32()))
    pq.write_table(holed, tokencache.table_path("k4"))
    assert tokencache.load_table("k4") is None

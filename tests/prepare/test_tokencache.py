"""The token-table cache: what it stores comes back; anything damaged is a miss, not an error."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from inferlab_bench.prepare import tokencache
from inferlab_bench.prepare.table import SCHEMA, Row, to_token_table
from inferlab_bench.prepare.tokentable import MAGIC, TableFileError, TokenTable


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _table() -> TokenTable:
    rows = [
        Row(0, "a", "invalid_conversation"),
        Row(1, "b", None, 1, 2, 30, 40, 5, 90),
        Row(2, "row-2 ü", None, 3, 4, 50, 1, 91, 2**40),
    ]
    batches = [
        pa.RecordBatch.from_pylist([r.__dict__ for r in rows[:2]], schema=SCHEMA),
        pa.RecordBatch.from_pylist([rows[2].__dict__], schema=SCHEMA),
    ]
    return to_token_table(pa.Table.from_batches(batches, schema=SCHEMA))


def test_the_arrow_table_becomes_columns_across_chunks() -> None:
    table = _table()
    assert table.num_rows == 3
    assert table.target_tokens == [-1, 40, 1]  # across two chunks
    assert table.reason == ["invalid_conversation", None, None]
    assert table.source_id == ["a", "b", "row-2 ü"]
    assert table.record_stop == [-1, 90, 2**40]  # 64-bit byte offsets


def test_stored_table_comes_back() -> None:
    path = tokencache.store_table("k1", _table())
    assert path == tokencache.table_path("k1") and path.is_file()
    assert tokencache.load_table("k1") == _table()


def test_with_counts_fills_the_rows_given_or_says_nothing_changed() -> None:
    table = _table()
    assert table.with_counts([1, 2], [30, 50], [40, 1]) is None
    filled = table.with_counts([0, 2], [7, 50], [8, 9])
    assert filled is not None and filled.input_tokens == [7, 30, 50]
    assert filled.target_tokens == [8, 40, 9] and table.target_tokens == [-1, 40, 1]


def _rebuilt(
    data: bytes, rows: object = None, strings: bytes | None = None, first_size: object = None
) -> bytes:
    """``data`` (a table file) with another row count, first column's byte length or
    string columns in its header."""
    header_end = data.index(b"\n", len(MAGIC))
    header = orjson.loads(data[len(MAGIC) : header_end])
    layout = header["columns"]
    payload = data[header_end + 1 :]
    ints, old_strings = payload[: -layout[-1][2]], payload[-layout[-1][2] :]
    strings = old_strings if strings is None else strings
    layout[-1][2] = len(strings)
    header["rows"] = header["rows"] if rows is None else rows
    layout[0][2] = layout[0][2] if first_size is None else first_size
    return MAGIC + orjson.dumps(header) + b"\n" + ints + strings


def test_absent_truncated_foreign_or_inconsistent_tables_are_misses() -> None:
    assert tokencache.load_table("absent") is None
    data = _table().to_bytes()
    assert _rebuilt(data) == data
    damaged = {
        "cut": data[:-3],
        "longer": data + b"\0",
        "header cut": data[:100],
        "other version": data.replace(MAGIC, b"inferlab-token-table 0\n", 1),
        "parquet": b"PAR1" + data[4:],
        "empty": b"",
        "rows": _rebuilt(data, rows=2),  # the columns hold three
        "rows not a count": _rebuilt(data, rows="3"),
        "size not a count": _rebuilt(data, first_size="24"),
        "negative size": _rebuilt(data, first_size=-24),
        "no header end": MAGIC + b'{"rows": 3',
        "header not an object": MAGIC + b"[1, 2]\n",
        "id not a string": _rebuilt(
            data, strings=orjson.dumps({"source_id": ["a", "b", 3], "reason": [None] * 3})
        ),
        "reasons short": _rebuilt(
            data, strings=orjson.dumps({"source_id": ["a", "b", "c"], "reason": [None]})
        ),
    }
    tokencache.table_path("x").parent.mkdir(parents=True)
    for key, content in damaged.items():
        tokencache.table_path(key).write_bytes(content)
        assert tokencache.load_table(key) is None, key
    with pytest.raises(TableFileError, match="different lengths"):
        TokenTable([1], ["a"], [None], [1], [1], [1], [1], [1], [])

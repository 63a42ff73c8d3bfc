"""The token table cache: Parquet keyed by dataset sha256 + tokenizer fingerprint + parameters."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from inferlab_bench.atomic import atomic_writer
from inferlab_bench.prepare.cache import cache_home
from inferlab_bench.prepare.materialize import MATERIALIZATION_IDENTITY, RULES_VERSION
from inferlab_bench.prepare.table import SCHEMA


def table_key(
    dataset_sha256: str,
    tokenizer_fingerprint: str,
    max_input_tokens: int,
    template_kwargs: Mapping[str, Any],
) -> str:
    """Everything the table's content depends on, hashed (the fixed output length is not:
    it is applied at selection time)."""
    facts = {
        "dataset_sha256": dataset_sha256,
        "tokenizer": tokenizer_fingerprint,
        "max_input_tokens": max_input_tokens,
        "chat_template_kwargs": dict(template_kwargs),
        "materialization": MATERIALIZATION_IDENTITY,
        "rules_version": RULES_VERSION,
    }
    return hashlib.sha256(orjson.dumps(facts, option=orjson.OPT_SORT_KEYS)).hexdigest()


def table_path(key: str) -> Path:
    return cache_home() / "token-tables" / f"{key}.parquet"


def load_table(key: str) -> pa.Table | None:
    """The cached table, or None if absent or unreadable (it is then rebuilt).

    Read through ``ParquetFile``: ``pq.read_table`` first sets up pyarrow's dataset
    machinery, which costs a warm preparation a few tenths of a second.
    """
    path = table_path(key)
    if not path.is_file():
        return None
    try:
        table = pq.ParquetFile(path, memory_map=True).read()
    except (OSError, pa.ArrowInvalid):
        return None
    if not table.schema.equals(SCHEMA):
        return None
    counts = [f.name for f in SCHEMA if pa.types.is_integer(f.type)]
    if any(table.column(name).null_count for name in counts):
        return None  # never written so: a damaged or foreign file
    return table


def store_table(key: str, table: pa.Table) -> Path:
    """LZ4, not zstd: the table is read on every warm preparation, where LZ4 decompresses
    about twice as fast for a somewhat larger file."""
    path = table_path(key)
    with atomic_writer(path) as handle:
        pq.write_table(table, handle, compression="lz4")
    return path

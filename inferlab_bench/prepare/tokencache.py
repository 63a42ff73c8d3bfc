"""The token table cache: ``tokentable`` files keyed by dataset sha256 + tokenizer fingerprint +
parameters."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.prepare.cache import cache_home
from inferlab_bench.prepare.materialize import MATERIALIZATION_IDENTITY, RULES_VERSION
from inferlab_bench.prepare.tokentable import VERSION, TableFileError, TokenTable


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
    return cache_home() / "token-tables" / f"{key}.v{VERSION}.table"


def load_table(key: str) -> TokenTable | None:
    """The cached table, or None if absent or unreadable (it is then rebuilt)."""
    try:
        return TokenTable.from_bytes(table_path(key).read_bytes())
    except (OSError, TableFileError):
        return None


def store_table(key: str, table: TokenTable) -> Path:
    """Written whole or not at all (``atomic``)."""
    path = table_path(key)
    write_bytes_atomic(path, table.to_bytes())
    return path

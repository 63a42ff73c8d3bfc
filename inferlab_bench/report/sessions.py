"""A conversation case's per-turn figures and reuse verdict, as text (reads sessions.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.case.turns import table_lines

SESSIONS_FILE = "sessions.json"


def read_sessions(directory: Path) -> dict[str, Any] | None:
    """The case's sessions.json (None: not a conversation case, or unreadable)."""
    path = directory / SESSIONS_FILE
    try:
        document = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return document if isinstance(document, dict) else None


def sessions_lines(document: dict[str, Any]) -> list[str]:
    """Sessions and turns measured, the per-turn table (ms), and the reuse verdict."""
    think = document.get("think_time") or {}
    head = (
        f"sessions: {document.get('measured_sessions')} measured "
        f"({document.get('measured_turns')} turns), {document.get('warmup_sessions')} warmup; "
        f"think time {think.get('kind')} {think.get('ms')} ms x {think.get('ratio')}"
    )
    reuse = document.get("prefix_reuse") or {}
    verdict = (
        f"prefix_reuse_reconciled: {reuse.get('prefix_reuse_reconciled')} "
        f"(block {reuse.get('block_tokens')} tokens): {reuse.get('reason')}"
    )
    return [head, *table_lines(document["per_turn"]), verdict]

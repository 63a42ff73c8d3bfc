"""A conversation case's per-turn figures and reuse verdict, as text (reads sessions.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

SESSIONS_FILE = "sessions.json"
FIGURES = {"ttft_ms": "TTFT", "itl_ms": "ITL", "e2e_ms": "E2E"}
"""sessions.json's per-turn metrics and their column labels."""


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


def table_lines(figures: dict[str, Any]) -> list[str]:
    """The per-turn table as text: one row for first, later, and each turn index."""
    header = f"{'turn':>6} {'n':>5}" + "".join(
        f" {label + ' p50':>9} {label + ' p90':>9}" for label in FIGURES.values()
    )
    rows = [("first", figures["first"]), ("later", figures["later"])]
    rows += [(str(row["turn"]), row) for row in figures["by_turn"]]
    return [header] + [_row(label, row) for label, row in rows]


def _row(label: str, row: dict[str, Any]) -> str:
    cells = []
    for name in FIGURES:
        value = row.get(name)
        cells += [_cell(None if value is None else value[p]) for p in ("p50", "p90")]
    return f"{label:>6} {row['requests']:>5}" + "".join(cells)


def _cell(value: float | None) -> str:
    return f" {'-':>9}" if value is None else f" {value:>9.1f}"

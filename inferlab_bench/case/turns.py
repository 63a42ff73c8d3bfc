"""Per-turn figures of a conversation case: TTFT, ITL and end-to-end latency by turn (pure).

A session's first turn prefills its whole prompt; every later turn resends the history, which
a prefix cache serves, so the two are reported apart (``first`` and ``later``) and by turn
index. Only succeeded requests count; a figure nobody measured is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FIGURES = {"ttft_ms": "TTFT", "itl_ms": "ITL", "e2e_ms": "E2E"}
"""Each per-turn metric and its column label."""


@dataclass(frozen=True)
class TurnColumns:
    """The measured phase's records as columns: turn index and the three latencies (ms)."""

    turn: npt.NDArray[np.int64]
    succeeded: npt.NDArray[np.bool_]
    ttft_ms: npt.NDArray[np.float64]
    itl_ms: npt.NDArray[np.float64]
    e2e_ms: npt.NDArray[np.float64]
    cached_tokens: npt.NDArray[np.float64]


def group_figures(columns: TurnColumns, mask: npt.NDArray[np.bool_]) -> dict[str, Any]:
    """Count, mean cached tokens, and p50 / p90 of each latency over the selected requests."""
    selected = mask & columns.succeeded
    out: dict[str, Any] = {"requests": int(selected.sum())}
    for name in FIGURES:
        values = getattr(columns, name)[selected]
        values = values[np.isfinite(values)]
        out[name] = (
            {"p50": _round(np.percentile(values, 50)), "p90": _round(np.percentile(values, 90))}
            if values.size
            else None
        )
    cached = columns.cached_tokens[selected]
    cached = cached[np.isfinite(cached)]
    out["mean_cached_tokens"] = _round(float(cached.mean())) if cached.size else None
    return out


def per_turn(columns: TurnColumns) -> dict[str, Any]:
    """``first`` / ``later`` and ``by_turn`` (one row per turn index measured)."""
    turns = sorted({int(t) for t in columns.turn[columns.succeeded]})
    return {
        "first": group_figures(columns, columns.turn == 0),
        "later": group_figures(columns, columns.turn > 0),
        "by_turn": [
            {"turn": turn, **group_figures(columns, columns.turn == turn)} for turn in turns
        ],
    }


def _round(value: Sequence[float] | float) -> float:
    return round(float(value), 3)  # type: ignore[arg-type]

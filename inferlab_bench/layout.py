"""Names that one stage writes and another reads, fixed by DESIGN.md: kept here once.

The preparation stage writes a population and its evidence side by side; the case stage
replays the population and reads the evidence back to reconcile token counts.
"""

from __future__ import annotations

from pathlib import Path

POPULATION_FILE = "population.jsonl"
EVIDENCE_FILE = "population-evidence.jsonl"
"""Per entry: source index and id, messages, held-out target, input and output tokens."""


def session_id(position: int) -> str:
    """The session id of population entry ``position``: ``inferlab-NNNNNNNN``."""
    return f"inferlab-{position:08d}"


def evidence_path(population: Path) -> Path:
    """Where the evidence of a population file lies (next to it)."""
    return population.with_name(EVIDENCE_FILE)

"""Facts about a frozen population file a person points at: sha256, entries, TPOT applicability."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson

from inferlab_bench.errors import PopulationError
from inferlab_bench.protocol import BenchPopulationInput


def population_facts(path: Path) -> BenchPopulationInput:
    """Read ``population.jsonl`` once: its digest, entry count and whether TPOT applies."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PopulationError(
            f"--population {path}: cannot read ({exc.strerror or exc})",
            hint="pass the population.jsonl written by `inferlab-bench prepare`",
        ) from exc
    lengths = [
        _output_length(path, number, line)
        for number, line in enumerate(data.splitlines(), 1)
        if line
    ]
    if not lengths:
        raise PopulationError(f"--population {path}: no entries", hint="prepare a population first")
    return BenchPopulationInput(
        path=path.resolve(),
        sha256=hashlib.sha256(data).hexdigest(),
        entries=len(lengths),
        tpot_applicable=min(lengths) >= 2,
    )


def _output_length(path: Path, number: int, line: bytes) -> int:
    try:
        value = orjson.loads(line)["output_length"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise PopulationError(
            f"{path}:{number}: not a population line (expected JSON with output_length)"
        ) from exc
    if not isinstance(value, int) or value < 1:
        raise PopulationError(
            f"{path}:{number}: output_length must be a positive integer, got {value!r}"
        )
    return value

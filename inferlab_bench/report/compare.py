"""Side-by-side comparison of two saved cases: metric deltas and what differs in setup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from inferlab_bench.report.rundir import SavedCase

Better = Literal["a", "b", "same"]

_HIGHER_IS_BETTER = ("throughput", "goodput", "good_request_ratio")
# Request fields that name where things were written, not what was measured.
_IGNORED_SETUP_KEYS = frozenset({"artifact_dir", "case_budget_seconds", "path"})


@dataclass(frozen=True)
class MetricDelta:
    name: str
    a: float
    b: float
    delta: float
    relative: float | None
    better: Better


@dataclass(frozen=True)
class Comparison:
    rows: tuple[MetricDelta, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    same_population: bool | None
    setup_differences: tuple[str, ...] | None


def higher_is_better(metric: str) -> bool:
    return any(word in metric for word in _HIGHER_IS_BETTER)


def metric_delta(name: str, a: float, b: float) -> MetricDelta:
    delta = b - a
    relative = None if a == 0 else delta / abs(a)
    if delta == 0:
        better: Better = "same"
    else:
        better = "b" if (delta > 0) == higher_is_better(name) else "a"
    return MetricDelta(name, a, b, delta, relative, better)


def compare_cases(a: SavedCase, b: SavedCase) -> Comparison:
    ma, mb = a.result.metrics, b.result.metrics
    rows = tuple(metric_delta(k, ma[k], mb[k]) for k in sorted(ma.keys() & mb.keys()))
    return Comparison(
        rows=rows,
        only_in_a=tuple(sorted(ma.keys() - mb.keys())),
        only_in_b=tuple(sorted(mb.keys() - ma.keys())),
        same_population=_same_population(a, b),
        setup_differences=_setup_differences(a, b),
    )


def _same_population(a: SavedCase, b: SavedCase) -> bool | None:
    pa = a.request.population if a.request else None
    pb = b.request.population if b.request else None
    if pa is None or pb is None:
        return None
    return pa.sha256 == pb.sha256 and pa.entries == pb.entries


def _setup_differences(a: SavedCase, b: SavedCase) -> tuple[str, ...] | None:
    if a.request is None or b.request is None:
        return None
    left = a.request.model_dump(mode="json")
    right = b.request.model_dump(mode="json")
    return tuple(diff_paths(left, right))


def diff_paths(left: Any, right: Any, prefix: str = "") -> list[str]:
    """``path: left -> right`` for every leaf that differs (ignoring output locations)."""
    if isinstance(left, dict) and isinstance(right, dict):
        out: list[str] = []
        for key in sorted(left.keys() | right.keys()):
            if key in _IGNORED_SETUP_KEYS:
                continue
            path = f"{prefix}.{key}" if prefix else key
            out += diff_paths(left.get(key), right.get(key), path)
        return out
    return [] if left == right else [f"{prefix}: {left!r} -> {right!r}"]

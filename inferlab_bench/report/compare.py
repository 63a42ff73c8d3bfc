"""Side-by-side comparison of two saved cases (or two sets of trials): metric deltas, whether
each difference is beyond the trial-to-trial noise, and what differs in setup."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from inferlab_bench.report.rundir import SavedCase
from inferlab_bench.validity.trials import NoiseComparison, compare_trials

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
    """B against A. With trials on either side, rows compare the means and ``noise`` holds
    Welch's verdict per metric; with one case per side ``noise`` is empty (not judged)."""

    rows: tuple[MetricDelta, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    same_population: bool | None
    setup_differences: tuple[str, ...] | None
    trials: tuple[int, int] = (1, 1)
    noise: tuple[NoiseComparison, ...] = ()
    validity: tuple[str, str] = ("unknown", "unknown")
    """Each side's validity as ``report`` shows it: ``pass``, ``fail: <verdicts>`` (any trial
    failing), or ``unknown`` (no validity.json)."""

    def noise_of(self, metric: str) -> NoiseComparison | None:
        return next((n for n in self.noise if n.metric == metric), None)

    def as_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["rows"] = [dataclasses.asdict(row) for row in self.rows]
        data["noise"] = [n.model_dump(mode="json") for n in self.noise]
        return data


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
    """One case against another: deltas only, the noise is unknown."""
    return compare_trial_sets((a,), (b,))


def compare_trial_sets(a: Sequence[SavedCase], b: Sequence[SavedCase]) -> Comparison:
    """Trials of A against trials of B (setup and population judged on the first of each)."""
    ma, mb = _means(a), _means(b)
    common = sorted(ma.keys() & mb.keys())
    metrics_a = [case.result.metrics for case in a]
    metrics_b = [case.result.metrics for case in b]
    judged = max(len(a), len(b)) > 1
    return Comparison(
        rows=tuple(metric_delta(k, ma[k], mb[k]) for k in common),
        only_in_a=tuple(sorted(ma.keys() - mb.keys())),
        only_in_b=tuple(sorted(mb.keys() - ma.keys())),
        same_population=_same_population(a[0], b[0]),
        setup_differences=_setup_differences(a[0], b[0]),
        trials=(len(a), len(b)),
        noise=compare_trials(metrics_a, metrics_b, common) if judged else (),
        validity=(side_validity(a), side_validity(b)),
    )


def side_validity(cases: Sequence[SavedCase]) -> str:
    """``pass``; ``fail: <verdicts>`` when any trial's validity.json failed; else unknown."""
    failed: set[str] = set()
    verdicts = []
    for case in cases:
        doc = case.validity or {}
        verdicts.append(doc.get("verdict", "unknown"))
        found = doc.get("verdicts") or {}
        failed |= {k for k, v in found.items() if v == "fail"}
    if "fail" in verdicts:
        return "fail: " + ", ".join(sorted(failed)) if failed else "fail"
    return "pass" if verdicts and all(v == "pass" for v in verdicts) else "unknown"


def pair_digits(a: float, b: float, least: int = 3, most: int = 9) -> int:
    """Decimals that show two values apart when they differ (0.000 vs 0.000 never, for +13%)."""
    for digits in range(least, most + 1):
        if a == b or round(a, digits) != round(b, digits):
            return digits
    return most


def _means(cases: Sequence[SavedCase]) -> dict[str, float]:
    """Each metric's mean over the trials that all report it."""
    shared = set.intersection(*(set(case.result.metrics) for case in cases))
    return {k: float(np.mean([case.result.metrics[k] for case in cases])) for k in shared}


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

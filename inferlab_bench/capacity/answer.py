"""The answer of a search from its probes: capacity, lowest failing load, first breach. Pure.

Only counted probes (valid ones, told to the planner) decide anything. The capacity is the
highest counted load that met the SLO below the lowest counted load that did not; a search
stopped by a probe the client could not drive claims no capacity at all.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferlab_bench.capacity.judge import MetricFigure, ProbeJudgement


class Status(enum.StrEnum):
    FOUND = "found"
    """A passing load below a failing one: the capacity lies between them."""
    ABOVE_RANGE = "above_range"
    """Every counted probe passed: the capacity is at least the top of the range."""
    BELOW_RANGE = "below_range"
    """Even the lowest load failed: the capacity is below the range."""
    CLIENT_LIMITED = "client_limited"
    """A probe stayed invalid because this client could not drive its load; no capacity."""
    UNMEASURED = "unmeasured"
    """A probe stayed invalid for another reason (the case failed, tokens did not reconcile,
    the cache stayed warm): the search stopped; no capacity claimed."""
    INCONCLUSIVE = "inconclusive"
    """The search ended without a counted verdict on either side."""


@dataclass(frozen=True)
class Probe:
    """One case run by the search, counted or not."""

    number: int
    load: float
    label: str
    directory: Path
    judgement: ProbeJudgement
    iteration: int | None
    """The planner's iteration this probe was told as (None: not counted)."""

    @property
    def counted(self) -> bool:
        return self.iteration is not None


@dataclass(frozen=True)
class PlannerFacts:
    """What AIPerf's planner says of its own search."""

    name: str
    convergence_reason: str | None
    boundary: Mapping[str, Any] | None
    """AIPerf's ``boundary_summary()`` in load units (feasible_max, infeasible_min, ...)."""


@dataclass(frozen=True)
class Answer:
    status: Status
    capacity: float | None
    lowest_failing: float | None
    highest_valid_pass: float | None
    """The highest counted pass (a lower bound even when no capacity is claimed)."""
    stopped_at_load: float | None
    """The load whose probe stayed invalid (client_limited / unmeasured only)."""
    first_breach: str | None
    first_breach_detail: str | None
    attainment_at_capacity: float | None
    goodput_at_capacity: float | None
    certified_at_capacity: bool | None
    """Every SLO bound's claim at the capacity certified by the early-stopping rule."""
    confidence: Mapping[str, Any] = field(default_factory=dict)
    message: str = ""

    @property
    def interval(self) -> tuple[float, float] | None:
        if self.capacity is None or self.lowest_failing is None:
            return None
        return (self.capacity, self.lowest_failing)


def answer(
    probes: Sequence[Probe],
    planner: PlannerFacts,
    *,
    stopped_at: Probe | None,
    labels: Mapping[float, str],
) -> Answer:
    """The search's answer; ``stopped_at`` is the probe that stayed invalid, if one did."""
    counted = [p for p in probes if p.counted]
    fails = sorted(p.load for p in counted if p.judgement.slo_met is False)
    lowest_failing = fails[0] if fails else None
    passes = [
        p
        for p in counted
        if p.judgement.slo_met and (lowest_failing is None or p.load < lowest_failing)
    ]
    best = max(passes, key=lambda p: p.load) if passes else None
    breach, detail = first_breach(counted)
    if stopped_at is not None:
        limited = stopped_at.judgement.client_limited
        status = Status.CLIENT_LIMITED if limited else Status.UNMEASURED
    elif best is not None and lowest_failing is not None:
        status = Status.FOUND
    elif best is not None:
        status = Status.ABOVE_RANGE
    elif lowest_failing is not None:
        status = Status.BELOW_RANGE
    else:
        status = Status.INCONCLUSIVE
    claimed = best if status in (Status.FOUND, Status.ABOVE_RANGE) else None
    return Answer(
        status=status,
        capacity=None if claimed is None else claimed.load,
        lowest_failing=lowest_failing,
        highest_valid_pass=None if best is None else best.load,
        stopped_at_load=None if stopped_at is None else stopped_at.load,
        first_breach=breach,
        first_breach_detail=detail,
        attainment_at_capacity=None if claimed is None else claimed.judgement.attainment,
        goodput_at_capacity=None if claimed is None else claimed.judgement.goodput,
        certified_at_capacity=None if claimed is None else _certified(claimed.judgement),
        confidence=confidence(planner, claimed, lowest_failing),
        message=_message(status, best, lowest_failing, stopped_at, labels),
    )


def first_breach(counted: Sequence[Probe]) -> tuple[str | None, str | None]:
    """The SLO metric that broke at the lowest load (ties: the larger overshoot there)."""
    candidates: list[tuple[float, float, MetricFigure]] = []
    for probe in counted:
        for m in probe.judgement.metrics:
            if not m.met:
                candidates.append((probe.load, -m.overshoot, m))
    if not candidates:
        failing = sorted((p for p in counted if p.judgement.slo_met is False), key=_load)
        if not failing or not failing[0].judgement.metrics:
            return None, None
        # Jointly missed, each bound alone held: name the one most requests missed.
        worst = max(failing[0].judgement.metrics, key=lambda m: m.over)
        return worst.metric, f"{worst.over} of {worst.samples} over {worst.bound_ms:g} ms"
    load, _, metric = min(candidates, key=lambda c: (c[0], c[1]))
    shown = "a failed request" if metric.value is None else f"{metric.value:.4g} ms"
    return metric.metric, (
        f"{shown} vs bound {metric.bound_ms:g} ms ({metric.over} of {metric.samples} over) "
        f"at load {load:g}"
    )


def confidence(
    planner: PlannerFacts, claimed: Probe | None, lowest_failing: float | None
) -> dict[str, Any]:
    """The planner's own confidence figures, and the bracket's relative width."""
    found: dict[str, Any] = {
        "planner": planner.name,
        "convergence_reason": planner.convergence_reason,
    }
    boundary = planner.boundary or {}
    for key in ("boundary_type", "boundary_ci", "binding_constraint", "non_monotonic_warning"):
        if key in boundary:
            found[key] = boundary[key]
    if claimed is not None and lowest_failing is not None:
        found["relative_bracket_width"] = (lowest_failing - claimed.load) / lowest_failing
    return found


def _certified(judgement: ProbeJudgement) -> bool | None:
    flags = [m.certified for m in judgement.metrics]
    if any(flag is None for flag in flags):
        return None
    return all(flags)


def _load(probe: Probe) -> float:
    return probe.load


def _message(
    status: Status,
    best: Probe | None,
    lowest_failing: float | None,
    stopped_at: Probe | None,
    labels: Mapping[float, str],
) -> str:
    def show(load: float | None) -> str:
        return "-" if load is None else labels.get(load, f"{load:g}")

    if stopped_at is not None:
        below = f"; the highest valid pass was {show(best.load)}" if best is not None else ""
        reason = stopped_at.judgement.invalid_reason
        if status is Status.CLIENT_LIMITED:
            return (
                f"no capacity claimed: the client could not drive {show(stopped_at.load)} on "
                f"this machine ({reason}){below}; run the load from more machines: "
                "--engine kube (docs/kube.md)"
            )
        return (
            f"no capacity claimed: the probe at {show(stopped_at.load)} could not be measured "
            f"({reason}){below}"
        )
    if status is Status.FOUND and best is not None:
        return f"capacity {show(best.load)}: it meets the SLO; {show(lowest_failing)} does not"
    if status is Status.ABOVE_RANGE and best is not None:
        return f"every load up to {show(best.load)} met the SLO: the capacity is at least that"
    if status is Status.BELOW_RANGE:
        return f"even {show(lowest_failing)} missed the SLO: the capacity is below the range"
    return "the search ended without a counted verdict"

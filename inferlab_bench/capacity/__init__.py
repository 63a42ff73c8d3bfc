"""Capacity: the highest load a server sustains within its SLOs, found by AIPerf's own
planner with every probe run and judged as one of our cases (``docs/capacity.md``)."""

from inferlab_bench.capacity.answer import Answer, PlannerFacts, Probe, Status
from inferlab_bench.capacity.judge import ProbeJudgement
from inferlab_bench.capacity.search import CapacityOutcome, run_capacity
from inferlab_bench.capacity.spec import (
    Axis,
    CapacityRequest,
    Criterion,
    PlannerName,
    SearchSpec,
)

__all__ = [
    "Answer",
    "Axis",
    "CapacityOutcome",
    "CapacityRequest",
    "Criterion",
    "PlannerFacts",
    "PlannerName",
    "Probe",
    "ProbeJudgement",
    "SearchSpec",
    "Status",
    "run_capacity",
]

"""The capacity search: AIPerf's planner picks each load, our case measures it, our judgement
decides whether it counts; the answer, ``capacity.json`` and the plot are written at the end."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from inferlab_bench import interrupts
from inferlab_bench.capacity import document as doc
from inferlab_bench.capacity.answer import Answer, PlannerFacts, Probe, answer
from inferlab_bench.capacity.judge import ProbeFigures, judge, planner_metrics
from inferlab_bench.capacity.planner import AiperfPlanner
from inferlab_bench.capacity.plot import capacity_plot
from inferlab_bench.capacity.probe import run_probe
from inferlab_bench.capacity.spec import CapacityRequest, CapacityResult
from inferlab_bench.case import aiperf_config
from inferlab_bench.case.engine import LoadEngine
from inferlab_bench.case.stage import CaseOptions
from inferlab_bench.errors import InferlabError, InterruptedStageError, StoppedError
from inferlab_bench.load import Load
from inferlab_bench.progress import NULL_PROGRESS, ProgressSink
from inferlab_bench.protocol import BenchClientRequest

INTERRUPTED = "interrupted by a signal"
"""How a case's failed result says SIGTERM/SIGINT stopped it (``interrupts.Guard.error``)."""
ProbeRunner = Callable[[BenchClientRequest, CaseOptions, LoadEngine | None], ProbeFigures]


@dataclass(frozen=True)
class CapacityOutcome:
    directory: Path
    answer: Answer
    probes: tuple[Probe, ...]
    planner: PlannerFacts
    document: Path
    plot: Path | None
    wall_seconds: float


class _Search:
    def __init__(self, request: CapacityRequest, root: Path) -> None:
        self.request = request
        self.spec = request.search
        self.root = root
        self.probes: list[Probe] = []
        slo = request.case.definition.request_slo
        assert slo is not None  # CapacityRequest refuses a case without one
        self.slo = slo.model_copy(update={"minimum_good_request_ratio": self.spec.criterion.ratio})

    def case_at(self, index: int, number: int) -> BenchClientRequest:
        """The probe's case: the request's case at this load, in its own folder, with the SLO
        judged at the criterion's share (so validity certifies at that percentile)."""
        base = self.request.case
        shape = self.spec.shape(index)
        definition = base.definition.model_copy(update={"request_slo": self.slo})
        return base.model_copy(
            update={
                "artifact_dir": self.root / f"{number:02d}-{Load.of(shape).slug}",
                "case": base.case.model_copy(update={"load_shape": shape}),
                "definition": definition,
            }
        )

    def planner(self) -> AiperfPlanner:
        first = self.case_at(self.spec.index_low, 0)
        plan = aiperf_config.build_plan(
            first,
            aiperf_dir=first.artifact_dir / "aiperf",
            timeout_seconds=interrupts.clamped(first.case_budget_seconds),
        )
        return AiperfPlanner(plan.config, self.spec, self.slo)


def run_capacity(
    request: CapacityRequest,
    options: CaseOptions,
    root: Path,
    progress: ProgressSink = NULL_PROGRESS,
    engine: LoadEngine | None = None,
    runner: ProbeRunner = run_probe,
) -> CapacityOutcome:
    """Search ``request``'s load range for the highest load meeting its SLO; every probe is a
    case under ``root``; an invalid probe is re-run ``reruns`` times, then the search stops."""
    started = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    search = _Search(request, root)
    planner = search.planner()
    spec = search.spec
    stopped_at: Probe | None = None
    progress.begin(f"capacity search ({spec.planner})", spec.max_probes, unit="probes")
    with interrupts.guard("capacity search"):
        try:
            while stopped_at is None:
                index = planner.ask()
                if index is None:
                    break
                stopped_at = _probe_load(search, planner, index, options, engine, runner)
                progress.advance()
        except StoppedError as exc:  # the probes so far stay listed, the search says why
            _write_stopped(search, planner.facts(), str(exc), time.monotonic() - started)
            raise
    progress.end()
    facts = planner.facts()
    labels = {p.load: p.label for p in search.probes}
    result = answer(search.probes, facts, stopped_at=stopped_at, labels=labels)
    wall = time.monotonic() - started
    data = doc.document(spec, result, search.probes, facts, root=root, wall_seconds=wall)
    path = doc.write(root / doc.CAPACITY_FILE, data)
    plot = capacity_plot(spec, result, search.probes, root / "plots" / "capacity.png")
    return CapacityOutcome(root, result, tuple(search.probes), facts, path, plot, wall)


def _probe_load(
    search: _Search,
    planner: AiperfPlanner,
    index: int,
    options: CaseOptions,
    engine: LoadEngine | None,
    runner: ProbeRunner,
) -> Probe | None:
    """Run one load until a valid probe (told to the planner); return the probe that stayed
    invalid after its re-runs (the search stops there), else None."""
    spec = search.spec
    for _ in range(spec.reruns + 1):
        number = len(search.probes) + 1
        request = search.case_at(index, number)
        figures = runner(request, options, engine)
        if figures.status != "succeeded" and INTERRUPTED in (figures.error or ""):
            # The case answered the signal; the search must stop too, not re-run it.
            raise InterruptedStageError(f"{request.artifact_dir.name}: {figures.error}")
        judgement = judge(figures, search.slo, spec.criterion)
        iteration = None
        if judgement.valid:
            iteration = sum(1 for p in search.probes if p.counted)
            label = request.artifact_dir.name
            feasible = planner.tell(label, planner_metrics(judgement, spec.criterion))
            if feasible is not judgement.slo_met:
                raise InferlabError(
                    f"{label}: AIPerf's planner judged the SLO {'met' if feasible else 'missed'}"
                    f" but the probe's own figures say otherwise",
                    hint="report this: the filters given to the planner disagree with ours",
                )
        probe = Probe(
            number=number,
            load=spec.load(index),
            label=spec.label(spec.load(index)),
            directory=request.artifact_dir,
            judgement=judgement,
            iteration=iteration,
        )
        search.probes.append(probe)
        if judgement.valid:
            return None
    return search.probes[-1]


def run_capacity_request(request: CapacityRequest) -> CapacityResult:
    """JSON mode: the search under the case's ``artifact_dir``; the document as the result."""
    options = CaseOptions(
        prefix_cache_reset=request.prefix_cache_reset, connections=request.connections
    )
    outcome = run_capacity(request, options, request.case.artifact_dir)
    return CapacityResult(
        status="succeeded",
        capacity_file=str(outcome.document),
        capacity=orjson.loads(outcome.document.read_bytes()),
    )


def _write_stopped(search: _Search, facts: PlannerFacts, error: str, wall: float) -> None:
    """capacity.json of a search a signal stopped: every probe so far, no answer claimed."""
    probes = search.probes
    result = answer(probes, facts, stopped_at=None, labels={p.load: p.label for p in probes})
    data = doc.document(
        search.spec,
        result,
        probes,
        facts,
        root=search.root,
        wall_seconds=wall,
        status="failed",
        error=error,
    )
    data["answer"] = None
    doc.write(search.root / doc.CAPACITY_FILE, data)

"""``inferlab-bench capacity``: the highest load meeting an SLO, found by AIPerf's planner with
every probe one of our cases; ``capacity-json`` is the same search in JSON mode."""

from __future__ import annotations

import argparse
import typing
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rich.table import Table

from inferlab_bench.capacity import (
    Axis,
    CapacityOutcome,
    CapacityRequest,
    Criterion,
    PlannerName,
    ProbeJudgement,
    SearchSpec,
    Status,
    run_capacity,
)
from inferlab_bench.capacity.document import answer_json, probe_json
from inferlab_bench.capacity.search import run_capacity_request
from inferlab_bench.capacity.spec import CapacityResult
from inferlab_bench.cli.caseflags import add_case_flags, case_options, target_from, workload_from
from inferlab_bench.cli.flags import bind, check_run_size, default_of, usage_error, with_flags
from inferlab_bench.cli.jsonmode import run_json_command
from inferlab_bench.cli.kube_flags import add_kube_flags, kube_options
from inferlab_bench.cli.options import CapacityFlags, CapacityJsonFlags
from inferlab_bench.cli.render import EXIT_FAILED, print_json, report_error, show
from inferlab_bench.cli.requestprogress import request_progress
from inferlab_bench.errors import ConfigurationError, InferlabError
from inferlab_bench.kube.job import KubeEngine
from inferlab_bench.runs.advice import run_size_advice
from inferlab_bench.runs.requests import CaseShape, case_request

PERCENTILE_CHOICES = typing.get_args(
    typing.get_args(CapacityFlags.model_fields["percentile"].annotation)[0]
)
PLANNERS = {
    "smooth-isotonic": PlannerName.SMOOTH_ISOTONIC,
    "monotonic": PlannerName.MONOTONIC,
    "bayesian": PlannerName.BAYESIAN,
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "capacity",
        help="find the highest load that meets an SLO (AIPerf's planner, every probe judged)",
        argument_default=argparse.SUPPRESS,
    )
    search = parser.add_argument_group("search (docs/capacity.md)")
    search.add_argument("--concurrency-range", help="LOW:HIGH concurrencies, e.g. 1:256")
    search.add_argument("--rate-range", help="LOW:HIGH requests per second, e.g. 0.5:64")
    search.add_argument("--burstiness", help="gamma arrivals with this smoothness (rate range)")
    search.add_argument(
        "--attainment",
        help="share of requests within every bound at once "
        f"({default_of(CapacityFlags, 'attainment')})",
    )
    search.add_argument(
        "--percentile",
        choices=PERCENTILE_CHOICES,
        help="instead: every bound held at this percentile",
    )
    search.add_argument(
        "--planner",
        choices=tuple(PLANNERS),
        help=f"AIPerf's planner ({default_of(CapacityFlags, 'planner')})",
    )
    search.add_argument(
        "--max-probes", help=f"counted probes at most ({default_of(CapacityFlags, 'max_probes')})"
    )
    search.add_argument(
        "--reruns",
        help="re-runs of a probe whose validity fails, then stop "
        f"({default_of(CapacityFlags, 'reruns')})",
    )
    add_case_flags(parser)
    parser.add_argument("--slo-e2e-ms", dest="slo_latency_ms", help="request latency bound, ms")
    add_kube_flags(parser)
    bind(parser, run)
    json_mode = sub.add_parser(
        "capacity-json",
        help="capacity search in JSON mode (inferlab-capacity-request-v1 -> result JSON)",
        argument_default=argparse.SUPPRESS,
    )
    json_mode.add_argument("--input", required=True, help="inferlab-capacity-request-v1 JSON")
    json_mode.add_argument("--output", required=True, help="where to write the result JSON")
    bind(json_mode, run_json)


def run(args: argparse.Namespace) -> int:
    return with_flags(args, CapacityFlags, _run)


def search_spec(flags: CapacityFlags) -> SearchSpec:
    """The search the validated flags describe."""
    if flags.percentile is not None:
        criterion = Criterion(kind="percentile", value=float(flags.percentile[1:]))
    else:
        criterion = Criterion(kind="attainment", value=flags.attainment)
    low, high = flags.concurrency_range or flags.rate_range or (0, 0)
    return SearchSpec(
        axis=Axis.CONCURRENCY if flags.concurrency_range else Axis.RATE,
        low=low,
        high=high,
        criterion=criterion,
        planner=PLANNERS[flags.planner],
        max_probes=flags.max_probes,
        reruns=flags.reruns,
        burstiness=flags.burstiness,
    )


def _run(flags: CapacityFlags) -> int:
    try:
        kube = kube_options(flags)
        spec = search_spec(flags)
        first = spec.shape(spec.index_low)
        shape = CaseShape(
            first, requests=flags.requests, warmup=flags.warmup, budget_seconds=flags.budget
        )
        workload = workload_from(flags)
        if workload.slo is not None:  # judged at the criterion's share, as every probe is
            ratio = spec.criterion.ratio
            slo = workload.slo.model_copy(update={"minimum_good_request_ratio": ratio})
            workload = replace(workload, slo=slo)
        base = case_request(target_from(flags), workload, shape, flags.out.resolve())
        request = CapacityRequest(case=base, search=spec)
        top = spec.shape(spec.index_high)
        check_run_size(run_size_advice(base, [first, top]), strict=flags.strict)
    except InferlabError as exc:
        return usage_error(exc)
    except ValueError as exc:  # the search model's own rules, worded for a person
        return usage_error(ConfigurationError(str(exc).splitlines()[-1]))
    try:
        with request_progress(flags.out, None, plain=flags.as_json) as progress:
            outcome = run_capacity(
                request,
                case_options(flags),
                flags.out.resolve(),
                progress=progress,
                engine=None if kube is None else KubeEngine(kube),
            )
    except InferlabError as exc:
        return report_error(exc)
    render(outcome, spec, as_json=flags.as_json)
    if outcome.answer.status is Status.UNMEASURED:
        return EXIT_FAILED  # nothing was measured that could be believed: say so in the code
    return EXIT_FAILED if flags.strict and outcome.answer.status is not Status.FOUND else 0


def render(outcome: CapacityOutcome, spec: SearchSpec, *, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "answer": answer_json(outcome.answer, spec),
                "probes": [probe_json(p, outcome.directory) for p in outcome.probes],
                "capacity_file": str(outcome.document),
                "plot": None if outcome.plot is None else str(outcome.plot),
            }
        )
        return
    show(probe_table(outcome, spec), answer_table(outcome, spec))
    print(outcome.answer.message)
    print(f"capacity.json: {outcome.document}")


def probe_table(outcome: CapacityOutcome, spec: SearchSpec) -> Table:
    names = [m.metric for m in outcome.probes[0].judgement.metrics] if outcome.probes else []
    share = f"p{spec.criterion.ratio * 100:g}"
    table = Table(title=f"capacity probes ({spec.criterion.label})")
    for column in ("#", "load", "counted", "validity", "SLO"):
        table.add_column(column)
    for name in names:
        table.add_column(f"{name} {share}", justify="right")
    for column in ("within SLO", "goodput", "folder"):
        table.add_column(column, justify="right")
    for p in outcome.probes:
        j = p.judgement
        cells: list[Any] = [
            str(p.number),
            p.label,
            "yes" if p.counted else "no",
            _validity(j),
            "-" if j.slo_met is None else ("met" if j.slo_met else "missed"),
        ]
        cells += [_ms(m.value) for m in j.metrics]
        cells += [_share(j.attainment), _num(j.goodput), p.directory.name]
        table.add_row(*cells)
    return table


def _validity(j: ProbeJudgement) -> str:
    """The case's own verdict, as ``report`` shows it; what failed, and whether it counted."""
    if j.validity != "fail":
        return j.validity
    return "FAIL: " + ", ".join(j.failed_verdicts) if j.failed_verdicts else "FAIL"


def answer_table(outcome: CapacityOutcome, spec: SearchSpec) -> Table:
    a = outcome.answer
    table = Table(title="capacity", show_header=False)
    table.add_column("what")
    table.add_column("value")
    rows = [
        ("status", a.status.value),
        ("capacity", spec.label(a.capacity)),
        ("lowest failing load", spec.label(a.lowest_failing)),
        ("first metric to breach", _breach(a.first_breach, a.first_breach_detail)),
        ("within SLO at capacity", _share(a.attainment_at_capacity)),
        ("goodput at capacity", _per_second(a.goodput_at_capacity, a.status.value)),
        (
            "certified at capacity",
            "-" if a.certified_at_capacity is None else str(a.certified_at_capacity),
        ),
        ("planner", _planner(a.confidence)),
        (
            "probes",
            f"{len(outcome.probes)} run, {sum(p.counted for p in outcome.probes)} counted, "
            f"{outcome.wall_seconds:.0f} s",
        ),
    ]
    if a.status in (Status.CLIENT_LIMITED, Status.UNMEASURED):
        rows[1:1] = [
            ("highest valid pass", spec.label(a.highest_valid_pass)),
            ("stopped at", spec.label(a.stopped_at_load)),
        ]
    for key, value in rows:
        table.add_row(key, value)
    return table


def run_json(args: argparse.Namespace) -> int:
    return with_flags(args, CapacityJsonFlags, _run_json)


def _run_json(flags: CapacityJsonFlags) -> int:
    return run_json_command(
        input_path=flags.input,
        output_path=flags.output,
        request_model=CapacityRequest,
        stage=run_capacity_request,
        failed_result=lambda message, raw: CapacityResult(status="failed", error=message),
        what="capacity search",
    )


def _per_second(value: float | None, status: str) -> str:
    return f"none ({status}: no load is claimed)" if value is None else f"{value:.3f} req/s"


def _planner(confidence: Mapping[str, Any]) -> str:
    reason = confidence.get("convergence_reason") or "it had not converged when the search stopped"
    return f"{confidence.get('planner')} ({reason})"


def _breach(metric: str | None, detail: str | None) -> str:
    return "-" if metric is None else f"{metric} ({detail})"


def _ms(value: float | None) -> str:
    return "failed" if value is None else f"{value:.2f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"

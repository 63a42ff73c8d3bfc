"""``inferlab-bench sweep``: one population, several concurrencies or rates, one table and plots."""

from __future__ import annotations

import argparse

from inferlab_bench.cli.caseflags import (
    add_case_flags,
    case_options,
    planned_records,
    target_from,
    workload_from,
)
from inferlab_bench.cli.flags import bind, check_run_size, usage_error, with_flags
from inferlab_bench.cli.kube_flags import add_kube_flags, kube_options, render_dry_run
from inferlab_bench.cli.options import SweepFlags
from inferlab_bench.cli.outcome import exit_code, render_cases
from inferlab_bench.cli.render import report_error
from inferlab_bench.cli.requestprogress import request_progress
from inferlab_bench.errors import InferlabError
from inferlab_bench.kube.job import KubeEngine
from inferlab_bench.runs.advice import run_size_advice
from inferlab_bench.runs.kube import dry_run
from inferlab_bench.runs.requests import CaseShape, case_request
from inferlab_bench.runs.sweep import run_sweep, sweep_requests


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "sweep",
        help="run a case at several concurrencies or rates",
        argument_default=argparse.SUPPRESS,
    )
    load = parser.add_argument_group("load points (exactly one)")
    load.add_argument("--concurrency", help="comma-separated concurrencies, e.g. 1,4,16")
    load.add_argument("--rate", help="comma-separated request rates, e.g. 0.5,1,2")
    load.add_argument("--burstiness", help="gamma arrivals with this smoothness (with --rate)")
    add_case_flags(parser)
    add_kube_flags(parser)
    bind(parser, run)


def run(args: argparse.Namespace) -> int:
    return with_flags(args, SweepFlags, _run)


def _run(flags: SweepFlags) -> int:
    try:
        kube = kube_options(flags)
        loads = flags.loads()
        shape = CaseShape(
            loads[0], requests=flags.requests, warmup=flags.warmup, budget_seconds=flags.budget
        )
        base = case_request(target_from(flags), workload_from(flags), shape, flags.out.resolve())
        check_run_size(run_size_advice(base, loads), strict=flags.strict)
    except InferlabError as exc:  # still the flags' fault: nothing has started
        return usage_error(exc)
    try:
        if kube is not None and kube.dry_run:
            requests = sweep_requests(base, loads, flags.out.resolve())
            return render_dry_run(dry_run(requests, kube), as_json=flags.as_json)
        planned, noun = planned_records(flags, len(loads) * flags.trials)
        with request_progress(flags.out, planned, plain=flags.as_json, noun=noun) as progress:
            outcome = run_sweep(
                base,
                loads,
                case_options(flags),
                flags.out.resolve(),
                trials=flags.trials,
                progress=progress,
                engine=None if kube is None else KubeEngine(kube),
            )
    except InferlabError as exc:
        return report_error(exc)
    render_cases(outcome.cases, (), as_json=flags.as_json, out=flags.out)
    return exit_code(outcome.cases, strict=flags.strict)

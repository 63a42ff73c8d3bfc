"""``inferlab-bench sweep``: one population, several concurrencies or rates, one table and plots."""

from __future__ import annotations

import argparse

from inferlab_bench.cli.caseflags import add_case_flags, case_options, target_from, workload_from
from inferlab_bench.cli.flags import bind, check_run_size, namespace, usage_error, with_flags
from inferlab_bench.cli.kube_flags import add_kube_flags, kube_options, render_dry_run, split_urls
from inferlab_bench.cli.outcome import exit_code, render_cases
from inferlab_bench.cli.render import report_error
from inferlab_bench.cli.requestprogress import request_progress
from inferlab_bench.errors import InferlabError
from inferlab_bench.kube.job import KubeEngine
from inferlab_bench.protocol import BenchLoadInput
from inferlab_bench.runs.advice import run_size_advice
from inferlab_bench.runs.kube import dry_run
from inferlab_bench.runs.options import SweepFlags
from inferlab_bench.runs.requests import CaseShape, case_request, load_shape
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


def sweep_loads(args: argparse.Namespace) -> list[BenchLoadInput]:
    """One load per validated --concurrency or --rate value."""
    if args.concurrency is not None:
        return [load_shape(concurrency=c) for c in args.concurrency]
    return [load_shape(rate=r, burstiness=args.burstiness) for r in args.rate]


def run(args: argparse.Namespace) -> int:
    return with_flags(args, SweepFlags, _run)


def _run(flags: SweepFlags) -> int:
    args = namespace(flags)
    try:
        kube = kube_options(args, split_urls(args))
        loads = sweep_loads(args)
        shape = CaseShape(
            loads[0], requests=args.requests, warmup=args.warmup, budget_seconds=args.budget
        )
        base = case_request(target_from(args), workload_from(args), shape, args.out.resolve())
        check_run_size(run_size_advice(base, loads), strict=args.strict)
    except InferlabError as exc:  # still the flags' fault: nothing has started
        return usage_error(exc)
    try:
        if kube is not None and kube.dry_run:
            requests = sweep_requests(base, loads, args.out.resolve())
            return render_dry_run(dry_run(requests, kube), as_json=args.as_json)
        planned = (args.requests + args.warmup) * len(loads) * args.trials
        with request_progress(args.out, planned, plain=args.as_json) as progress:
            outcome = run_sweep(
                base,
                loads,
                case_options(args),
                args.out.resolve(),
                trials=args.trials,
                progress=progress,
                engine=None if kube is None else KubeEngine(kube),
            )
    except InferlabError as exc:
        return report_error(exc)
    render_cases(outcome.cases, (), as_json=args.as_json, out=args.out)
    return exit_code(outcome.cases, strict=args.strict)

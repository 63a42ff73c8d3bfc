"""``inferlab-bench run``: one case with ordinary flags; saves request/result/plots in --out."""

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
from inferlab_bench.cli.options import RunFlags
from inferlab_bench.cli.outcome import exit_code, render_cases
from inferlab_bench.cli.render import report_error
from inferlab_bench.cli.requestprogress import request_progress
from inferlab_bench.errors import InferlabError
from inferlab_bench.kube.job import KubeEngine
from inferlab_bench.report.figures import case_plots
from inferlab_bench.runs.advice import run_size_advice
from inferlab_bench.runs.execute import run_and_save
from inferlab_bench.runs.kube import dry_run
from inferlab_bench.runs.requests import CaseShape, case_request
from inferlab_bench.runs.trials import run_trials


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "run",
        help="run one case against a server (human flags)",
        argument_default=argparse.SUPPRESS,
    )
    load = parser.add_argument_group("load (exactly one)")
    load.add_argument("--concurrency", help="fixed number of in-flight requests")
    load.add_argument("--rate", help="request rate per second (poisson)")
    load.add_argument("--burstiness", help="gamma arrivals with this smoothness (with --rate)")
    load.add_argument("--unbounded", action="store_true", help="send every request at once")
    add_case_flags(parser)
    add_kube_flags(parser)
    bind(parser, run)


def run(args: argparse.Namespace) -> int:
    return with_flags(args, RunFlags, _run)


def _run(flags: RunFlags) -> int:
    try:
        kube = kube_options(flags)
        shape = CaseShape(
            flags.load(), requests=flags.requests, warmup=flags.warmup, budget_seconds=flags.budget
        )
        request = case_request(target_from(flags), workload_from(flags), shape, flags.out.resolve())
        check_run_size(run_size_advice(request), strict=flags.strict)
    except InferlabError as exc:  # still the flags' fault: nothing has started
        return usage_error(exc)
    try:
        if kube is not None and kube.dry_run:
            return render_dry_run(dry_run([request], kube), as_json=flags.as_json)
        options = case_options(flags)
        engine = None if kube is None else KubeEngine(kube)
        planned, noun = planned_records(flags, flags.trials)
        with request_progress(flags.out, planned, plain=flags.as_json, noun=noun):
            if flags.trials > 1:
                outcome = run_trials(request, options, flags.trials, engine)
                cases, summaries = list(outcome.trials), outcome.summaries
            else:
                cases, summaries = [run_and_save(request, options, engine)], ()
    except InferlabError as exc:
        return report_error(exc)
    case_plots(cases, flags.out / "plots")
    render_cases(cases, summaries, as_json=flags.as_json, out=flags.out)
    return exit_code(cases, strict=flags.strict)

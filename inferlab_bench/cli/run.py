"""``inferlab-bench run``: one case with ordinary flags; saves request/result/plots in --out."""

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
from inferlab_bench.report.figures import case_plots
from inferlab_bench.runs.advice import run_size_advice
from inferlab_bench.runs.execute import run_and_save
from inferlab_bench.runs.kube import dry_run
from inferlab_bench.runs.options import RunFlags
from inferlab_bench.runs.requests import CaseShape, case_request, load_shape
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
    args = namespace(flags)
    try:
        kube = kube_options(args, split_urls(args))
        shape = CaseShape(
            load_shape(args.concurrency, args.rate, args.burstiness, args.unbounded),
            requests=args.requests,
            warmup=args.warmup,
            budget_seconds=args.budget,
        )
        request = case_request(target_from(args), workload_from(args), shape, args.out.resolve())
        check_run_size(run_size_advice(request), strict=args.strict)
    except InferlabError as exc:  # still the flags' fault: nothing has started
        return usage_error(exc)
    try:
        if kube is not None and kube.dry_run:
            return render_dry_run(dry_run([request], kube), as_json=args.as_json)
        options = case_options(args)
        engine = None if kube is None else KubeEngine(kube)
        planned = (args.requests + args.warmup) * args.trials
        with request_progress(args.out, planned, plain=args.as_json):
            if args.trials > 1:
                outcome = run_trials(request, options, args.trials, engine)
                cases, summaries = list(outcome.trials), outcome.summaries
            else:
                cases, summaries = [run_and_save(request, options, engine)], ()
    except InferlabError as exc:
        return report_error(exc)
    case_plots(cases, args.out / "plots")
    render_cases(cases, summaries, as_json=args.as_json, out=args.out)
    return exit_code(cases, strict=args.strict)

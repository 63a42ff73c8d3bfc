"""``inferlab-bench demo``: the offline tour — simulator, population, sweep, table and plots."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from inferlab_bench.cli.caseflags import aiperf_echo
from inferlab_bench.cli.outcome import exit_code, render_cases
from inferlab_bench.cli.progress import stderr_progress
from inferlab_bench.cli.render import report_error
from inferlab_bench.errors import InferlabError
from inferlab_bench.runs.demo import DemoSettings, run_demo


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("demo", help="offline demo against the built-in simulated server")
    parser.add_argument("--out", type=Path, default=Path("inferlab-demo"), help="output directory")
    parser.add_argument("--concurrency", default="1,4,16", help="comma-separated concurrencies")
    parser.add_argument("--requests", type=int, default=32, help="profiling requests per case")
    parser.add_argument("--json", action="store_true", help="print machine-readable results")
    parser.add_argument("--verbose", action="store_true", help="stream AIPerf's own console output")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        concurrencies = tuple(int(v) for v in args.concurrency.split(","))
    except ValueError:
        print(
            f"inferlab-bench: error: --concurrency {args.concurrency!r}: expected integers",
            file=sys.stderr,
        )
        return 2
    settings = DemoSettings(
        out=args.out,
        concurrencies=concurrencies,
        requests=args.requests,
        aiperf_echo=aiperf_echo(args.verbose),
    )
    print(
        "inferlab-bench demo: everything runs on this machine (simulated server on 127.0.0.1)",
        file=sys.stderr,
    )
    try:
        outcome = run_demo(settings, stderr_progress())
    except InferlabError as exc:
        return report_error(exc)
    prep = outcome.preparation
    print(f"dataset: {outcome.dataset.note}", file=sys.stderr)
    print(
        f"population: {prep.population.entries if prep.population else 0} entries, "
        f"{prep.admitted_entries} of {prep.candidate_entries} conversations admitted",
        file=sys.stderr,
    )
    render_cases(
        outcome.sweep.cases,
        (),
        as_json=args.json,
        out=outcome.sweep.directory,
        title="demo sweep (simulated server, prefix cache reset before each case)",
    )
    for plot in outcome.sweep.plots:
        print(f"plot: {plot}", file=sys.stderr)
    print(f"simulator ground truth: {outcome.ground_truth}", file=sys.stderr)
    return exit_code(outcome.sweep.cases, strict=False)

"""``inferlab-bench demo``: the offline tour — simulator, population, sweep, table and plots."""

from __future__ import annotations

import argparse
import sys

from inferlab_bench.cli.caseflags import aiperf_echo
from inferlab_bench.cli.flags import bind, default_of, with_flags
from inferlab_bench.cli.options import DemoFlags
from inferlab_bench.cli.outcome import exit_code, render_cases
from inferlab_bench.cli.progress import stderr_progress
from inferlab_bench.cli.render import report_error
from inferlab_bench.errors import InferlabError
from inferlab_bench.runs.demo import DemoSettings, run_demo


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "demo",
        help="offline demo against the built-in simulated server",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("--out", help=f"output directory ({default_of(DemoFlags, 'out')})")
    parser.add_argument(
        "--concurrency",
        help=f"comma-separated concurrencies ({default_of(DemoFlags, 'concurrency')})",
    )
    parser.add_argument(
        "--requests", help=f"profiling requests per case ({default_of(DemoFlags, 'requests')})"
    )
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="print machine-readable results"
    )
    parser.add_argument("--verbose", action="store_true", help="stream AIPerf's own console output")
    bind(parser, run)


def run(args: argparse.Namespace) -> int:
    return with_flags(args, DemoFlags, _run)


def _run(args: DemoFlags) -> int:
    settings = DemoSettings(
        out=args.out,
        concurrencies=tuple(args.concurrency),
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
        as_json=args.as_json,
        out=outcome.sweep.directory,
        title="demo sweep (simulated server, prefix cache reset before each case)",
    )
    for plot in outcome.sweep.plots:
        print(f"plot: {plot}", file=sys.stderr)
    print(f"simulator ground truth: {outcome.ground_truth}", file=sys.stderr)
    return exit_code(outcome.sweep.cases, strict=False)

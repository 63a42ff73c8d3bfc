"""``inferlab-bench compare A B``: deltas, whether each is beyond noise, whether setups match."""

from __future__ import annotations

import argparse

from inferlab_bench.cli.flags import bind, with_flags
from inferlab_bench.cli.render import print_json, report_error, show
from inferlab_bench.errors import InferlabError
from inferlab_bench.report.compare import compare_trial_sets
from inferlab_bench.report.rundir import load_trials
from inferlab_bench.report.tables import comparison_table
from inferlab_bench.runs.options import CompareFlags


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "compare",
        help="compare two saved results (A = baseline, B = candidate)",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "a", help="run directory, result.json, or a `run --trials` folder (baseline)"
    )
    parser.add_argument(
        "b", help="run directory, result.json, or a `run --trials` folder (candidate)"
    )
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="print the comparison as JSON"
    )
    bind(parser, run)


def run(args: argparse.Namespace) -> int:
    return with_flags(args, CompareFlags, _run)


def _run(args: CompareFlags) -> int:
    try:
        a, b = load_trials(args.a), load_trials(args.b)
    except InferlabError as exc:
        return report_error(exc)
    comparison = compare_trial_sets(a, b)
    if args.as_json:
        print_json(comparison.as_json())
    else:
        show(comparison_table(comparison, str(args.a), str(args.b)))
    return 0

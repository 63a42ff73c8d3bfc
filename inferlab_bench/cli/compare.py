"""``inferlab-bench compare A B``: side-by-side metrics, deltas, and whether setups match."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from inferlab_bench.cli.render import print_json, report_error, show
from inferlab_bench.errors import InferlabError
from inferlab_bench.report.compare import compare_cases
from inferlab_bench.report.rundir import load_case
from inferlab_bench.report.tables import comparison_table


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "compare", help="compare two saved results (A = baseline, B = candidate)"
    )
    parser.add_argument("a", type=Path, help="run directory or result.json (baseline)")
    parser.add_argument("b", type=Path, help="run directory or result.json (candidate)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        a, b = load_case(args.a), load_case(args.b)
    except InferlabError as exc:
        return report_error(exc)
    comparison = compare_cases(a, b)
    if args.json:
        print_json(dataclasses.asdict(comparison))
    else:
        show(comparison_table(comparison, str(args.a), str(args.b)))
    return 0

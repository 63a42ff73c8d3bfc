"""``inferlab-bench report DIR``: tables and plots from saved cases (never runs anything)."""

from __future__ import annotations

import argparse
from pathlib import Path

from inferlab_bench.cli.render import print_json, report_error, show
from inferlab_bench.errors import InferlabError, RequestError
from inferlab_bench.report.rundir import find_cases
from inferlab_bench.report.tables import case_table, sweep_table


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "report", help="summary table and plots from a saved run or sweep directory"
    )
    parser.add_argument(
        "directory", type=Path, help="a run directory, or a sweep directory of runs"
    )
    parser.add_argument("--no-plots", action="store_true", help="only print the tables")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        cases = find_cases(args.directory)
        if not cases:
            raise RequestError(
                f"{args.directory}: no result.json here or in its sub-directories",
                hint="point at the --out directory of `inferlab-bench run` or `sweep`",
            )
    except InferlabError as exc:
        return report_error(exc)
    if args.json:
        print_json({c.label: c.result.model_dump(mode="json") for c in cases})
        return 0
    if len(cases) == 1:
        show(case_table(cases[0].result, title=cases[0].label))
    else:
        show(sweep_table(cases, title=str(args.directory)))
    return 0

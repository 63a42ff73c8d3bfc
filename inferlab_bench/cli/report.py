"""``inferlab-bench report DIR``: tables and plots from saved cases (never runs anything)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.text import Text

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.cli.flags import bind, with_flags
from inferlab_bench.cli.options import ReportFlags
from inferlab_bench.cli.outcome import cases_document, show_verdicts
from inferlab_bench.cli.render import print_json, report_error, show
from inferlab_bench.errors import InferlabError, RequestError
from inferlab_bench.publish.html import build_page
from inferlab_bench.report.check import check_folder
from inferlab_bench.report.figures import case_plots
from inferlab_bench.report.rundir import find_cases, trial_summaries
from inferlab_bench.report.sessions import read_sessions, sessions_lines
from inferlab_bench.report.tables import case_table, sweep_table


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "report",
        help="summary table and plots from a saved run or sweep directory",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("directory", help="a run directory, or a sweep directory of runs")
    parser.add_argument("--no-plots", action="store_true", help="only print the tables")
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="print the results as JSON"
    )
    parser.add_argument(
        "--html", help="also write one self-contained HTML page (run, sweep, bundle, reproduction)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check that the folder's numbers, verdicts and marks agree (exit 1 if not)",
    )
    bind(parser, run)


def run(args: argparse.Namespace) -> int:
    return with_flags(args, ReportFlags, _run)


def _run(args: ReportFlags) -> int:
    if args.check:
        return _check(args.directory, as_json=args.as_json)
    if args.html is not None:
        return _html(args.directory, args.html)
    try:
        cases = find_cases(args.directory)
        if not cases:
            raise RequestError(
                f"{args.directory}: no result.json here or in its sub-directories",
                hint="point at the --out directory of `inferlab-bench run` or `sweep`",
            )
        summaries = trial_summaries(args.directory)
    except InferlabError as exc:
        return report_error(exc)
    if args.as_json:
        print_json(cases_document(cases, summaries, key=lambda c: c.label))
        return 0
    if len(cases) == 1:
        show(case_table(cases[0].result, title=cases[0].label, validity=cases[0].validity))
        conversation = read_sessions(cases[0].directory)
        if conversation is not None:
            show(Text("\n".join(sessions_lines(conversation))))
    else:
        show(sweep_table(cases, title=str(args.directory)))
    show_verdicts(cases, summaries)
    if not args.no_plots:
        for path in case_plots(cases, args.directory / "plots"):
            show(Text(f"plot: {path}"))
    return 0


def _html(directory: Path, target: Path) -> int:
    try:
        write_bytes_atomic(target, build_page(directory).encode())
    except InferlabError as exc:
        return report_error(exc)
    show(Text(f"html: {target}"))
    return 0


def _check(directory: Path, *, as_json: bool) -> int:
    """Every check over the folder: the findings (exit 1), or a line saying all agree."""
    report = check_folder(directory)
    if not report.cases and not report.capacity_searches:
        return report_error(
            RequestError(
                f"{directory}: no result.json or capacity.json here or below",
                hint="point --check at a folder written by run, sweep, capacity, demo or reproduce",
            )
        )
    if as_json:
        print_json(report.as_json())
        return 0 if report.consistent else 1
    for note in report.notes:
        show(Text(f"note: {note}", style="dim"))
    for finding in report.findings:
        show(Text(f"INCONSISTENT {finding.check}: {finding.path}: {finding.message}"))
    checked = (
        f"{report.cases} cases, {report.trials_folders} trials folders, "
        f"{report.capacity_searches} capacity searches"
    )
    if report.consistent:
        show(Text(f"check: consistent ({checked} under {directory})"))
        return 0
    show(Text(f"check: {len(report.findings)} inconsistencies ({checked} under {directory})"))
    return 1

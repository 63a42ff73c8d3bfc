"""``inferlab-bench compare A B``: deltas, whether each is beyond noise, whether setups match."""

from __future__ import annotations

import argparse

from rich.text import Text

from inferlab_bench.cli.flags import bind, with_flags
from inferlab_bench.cli.options import CompareFlags
from inferlab_bench.cli.render import print_json, report_error, show
from inferlab_bench.errors import InferlabError
from inferlab_bench.publish.baselines import (
    baseline_document,
    foreign_file,
    judge_against,
    load_baseline,
    our_cases,
    peer_kind,
)
from inferlab_bench.publish.comparable import as_document
from inferlab_bench.publish.tables import case_lines, verdict_table
from inferlab_bench.report.compare import compare_trial_sets
from inferlab_bench.report.rundir import load_trials
from inferlab_bench.report.tables import comparison_table


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "compare",
        help="compare two saved results (A = baseline, B = candidate)",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "a",
        help="run directory, result.json, a `run --trials` folder, or a peer's result file "
        "(GuideLLM, vllm bench serve / sweep, SGLang bench_serving, AIPerf export) (baseline)",
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
    if peer_kind(args.a) is not None:
        return _against_peer(args)
    try:
        foreign_file(args.a)
        a, b = load_trials(args.a), load_trials(args.b)
    except InferlabError as exc:
        return report_error(exc)
    comparison = compare_trial_sets(a, b)
    if args.as_json:
        print_json(comparison.as_json())
    else:
        show(comparison_table(comparison, str(args.a), str(args.b)))
    return 0


def _against_peer(args: CompareFlags) -> int:
    """A peer's file as the published side, each of our cases judged against it."""
    try:
        baseline = load_baseline(args.a)
        verdicts = judge_against(baseline, our_cases(args.b))
    except InferlabError as exc:
        return report_error(exc)
    if args.as_json:
        print_json({"baseline": baseline_document(baseline), "cases": as_document(verdicts)})
        return 0
    for case in verdicts:
        show(
            verdict_table(case, title=f"{case.label}: {baseline.tool} ({args.a.name}) vs {args.b}")
        )
        for line in case_lines(case):
            show(Text(line))
    return 0

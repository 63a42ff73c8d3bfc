"""``inferlab-bench reproduce BUNDLE --url --model --tokenizer --out``: re-run and judge."""

from __future__ import annotations

import argparse

from rich.text import Text

from inferlab_bench.case.reset import OPTION_HELP
from inferlab_bench.cli.caseflags import aiperf_echo
from inferlab_bench.cli.flags import bind, with_flags
from inferlab_bench.cli.options import ReproduceFlags
from inferlab_bench.cli.render import print_json, report_error, show
from inferlab_bench.cli.requestprogress import request_progress
from inferlab_bench.errors import InferlabError
from inferlab_bench.publish.reproduce import ReproduceSettings, reproduce
from inferlab_bench.publish.tables import case_lines, summary_counts, verdict_table
from inferlab_bench.publish.verdict import Settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "reproduce",
        help="re-run a published bundle against a server and judge every metric",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("bundle", help="the .tar.gz written by `inferlab-bench bundle`")
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", required=True, help="served model name")
    parser.add_argument("--tokenizer", required=True, help="local tokenizer directory")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--trials", help="trials per case (default 3)")
    parser.add_argument(
        "--reprepare",
        action="store_true",
        help="rebuild the population from the recorded inputs (refused if its sha256 differs)",
    )
    parser.add_argument("--dataset", help="with --reprepare: the dataset file to prepare from")
    parser.add_argument(
        "--baseline",
        help="also judge against a peer's result file (GuideLLM JSON/YAML, vllm bench serve "
        "or sweep JSON, SGLang bench_serving JSONL, AIPerf's export)",
    )
    parser.add_argument(
        "--tolerance",
        help="smallest relative difference called faster/slower, 0-1 (default 0.05)",
    )
    parser.add_argument(
        "--reset-prefix-cache",
        help="the reset call for cases that reset the prefix cache "
        f"({OPTION_HELP}); needed when a bundle records a call that is none of these",
    )
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="print the verdicts as JSON"
    )
    parser.add_argument("--verbose", action="store_true", help="stream AIPerf's console output")
    bind(parser, run)


def run(args: argparse.Namespace) -> int:
    return with_flags(args, ReproduceFlags, _run)


def _run(flags: ReproduceFlags) -> int:
    settings = ReproduceSettings(
        bundle=flags.bundle,
        url=flags.url,
        served_name=flags.model,
        tokenizer=flags.tokenizer,
        out=flags.out,
        trials=flags.trials,
        reprepare=flags.reprepare,
        dataset=flags.dataset,
        baseline=flags.baseline,
        verdict=Settings(tolerance=flags.tolerance),
        echo=aiperf_echo(flags.verbose),
        prefix_cache_reset=flags.reset_prefix_cache,
    )
    try:
        with request_progress(flags.out, None, plain=flags.as_json) as progress:
            outcome = reproduce(settings, progress=progress)
    except InferlabError as exc:
        return report_error(exc)
    if flags.as_json:
        print_json(outcome.document)
        return 0
    for case in outcome.cases:
        show(verdict_table(case))
        for line in case_lines(case):
            show(Text(line))
    for case in outcome.against_baseline:
        show(verdict_table(case, title=f"{case.label}: baseline {flags.baseline} vs reproduced"))
        for line in case_lines(case):
            show(Text(line))
    document = outcome.document
    show(
        Text(
            f"published figures recomputed from their records: "
            f"{document['published_trials_recomputed']} of {document['published_trials']} trials"
        )
    )
    counts = ", ".join(f"{n} {word}" for word, n in sorted(summary_counts(outcome.cases).items()))
    show(Text(f"verdicts: {counts}; in {outcome.directory / 'reproduction.json'}"))
    return 0

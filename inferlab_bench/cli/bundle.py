"""``inferlab-bench bundle DIR --out FILE`` and ``bundle --verify FILE``."""

from __future__ import annotations

import argparse
import sys

from rich.text import Text

from inferlab_bench.cli.flags import bind, with_flags
from inferlab_bench.cli.options import BundleFlags
from inferlab_bench.cli.render import print_json, report_error, show
from inferlab_bench.errors import InferlabError
from inferlab_bench.publish.archive import read_bundle
from inferlab_bench.publish.bundle import write_bundle


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "bundle",
        help="archive a run or sweep for publishing, or verify such an archive",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("directory", nargs="?", help="the --out directory of `run` or `sweep`")
    parser.add_argument("--out", help="the archive to write, e.g. result.tar.gz")
    parser.add_argument(
        "--no-records", action="store_true", help="leave out records.parquet (smaller)"
    )
    parser.add_argument("--verify", help="check every member of this archive against its index")
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="print the index as JSON"
    )
    bind(parser, run)


def run(args: argparse.Namespace) -> int:
    return with_flags(args, BundleFlags, _run)


def _run(flags: BundleFlags) -> int:
    checked = ""
    try:
        if flags.verify is not None:
            bundle = read_bundle(flags.verify)
            index, what = bundle.index, f"{flags.verify}: verified"
            checked = (
                f"; the figures of {bundle.recomputed} of {bundle.trials} trial(s) recomputed "
                "from their records"
            )
        else:
            assert flags.directory is not None and flags.out is not None  # the rules say so
            made = write_bundle(flags.directory, flags.out, records=not flags.no_records)
            index, what = made.index, f"{flags.out}: written"
    except InferlabError as exc:
        return report_error(exc)
    if flags.as_json:
        print_json(index)
        return 0
    population = index.get("population") or {}
    show(
        Text(
            f"{what}: {len(index['members'])} members, {len(index['cases'])} case(s), "
            f"population sha256 {population.get('sha256', '(synthetic prompts)')}"
        )
    )
    for case in index["cases"]:
        show(Text(f"  {case['path']}: {case['label']}, {len(case['trials'])} trial(s)"))
    if flags.verify is not None:
        print(f"every member's sha256 matches BUNDLE.json{checked}", file=sys.stderr)
    return 0

"""``inferlab-bench dataset fetch|verify|path``: the dataset cache by hand."""

from __future__ import annotations

import argparse
from pathlib import Path

from inferlab_bench.cli.progress import stderr_progress
from inferlab_bench.cli.render import EXIT_FAILED, report_error
from inferlab_bench.errors import DatasetError, InferlabError
from inferlab_bench.prepare.acquire import acquire
from inferlab_bench.prepare.cache import cached_path, file_sha256
from inferlab_bench.prepare.catalog import load_entry
from inferlab_bench.prepare.digest import verify


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("dataset", help="fetch, verify or locate a catalogued dataset")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    fetch = actions.add_parser("fetch", help="download into the content-addressed cache and verify")
    fetch.add_argument("name", choices=["sharegpt"])
    check = actions.add_parser(
        "verify", help="check a cached dataset (or a file) against the catalog"
    )
    check.add_argument("target", help="'sharegpt' (its cached copy) or a file path")
    where = actions.add_parser("path", help="print where the cached file lives")
    where.add_argument("name", choices=["sharegpt"])
    for action in (fetch, check, where):
        action.add_argument(
            "--catalog-dir", type=Path, default=None, help="another catalog directory"
        )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        entry = load_entry("sharegpt", args.catalog_dir)
        if args.action == "path":
            print(cached_path(entry.sha256))
            return 0
        if args.action == "fetch":
            got = acquire(entry, cached_path(entry.sha256), stderr_progress())
            print(f"{got.path} ({got.origin}, sha256 {got.sha256} verified)")
            return 0
        path = cached_path(entry.sha256) if args.target == "sharegpt" else Path(args.target)
        if not path.is_file():
            raise DatasetError(
                f"{path}: not present", hint="run `inferlab-bench dataset fetch sharegpt`"
            )
        verify(str(path), entry.sha256, file_sha256(path))
        print(f"{path}: sha256 {entry.sha256} OK")
        return 0
    except InferlabError as exc:
        report_error(exc)
        return EXIT_FAILED

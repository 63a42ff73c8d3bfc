"""``inferlab-bench dataset fetch|verify|path``: the dataset cache by hand."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inferlab_bench.cli.flags import EXIT_USAGE, bind, with_flags
from inferlab_bench.cli.options import DatasetFlags, DatasetVerifyFlags
from inferlab_bench.cli.progress import stderr_progress
from inferlab_bench.cli.render import EXIT_FAILED, report_error
from inferlab_bench.errors import DatasetError, InferlabError
from inferlab_bench.prepare.acquire import acquire
from inferlab_bench.prepare.cache import cached_path, file_sha256
from inferlab_bench.prepare.catalog import CatalogEntry, load_entry
from inferlab_bench.prepare.digest import verify

Flags = DatasetFlags | DatasetVerifyFlags
Handler = Callable[[argparse.Namespace], int]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("dataset", help="fetch, verify or locate a catalogued dataset")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    # No action: its help, which lists the actions (as the bare command lists commands).
    parser.set_defaults(handler=_listing(parser))
    fetch = actions.add_parser(
        "fetch",
        help="download into the content-addressed cache and verify",
        argument_default=argparse.SUPPRESS,
    )
    fetch.add_argument("name", choices=["sharegpt"])
    check = actions.add_parser(
        "verify",
        help="check a cached dataset (or a file) against the catalog",
        argument_default=argparse.SUPPRESS,
    )
    check.add_argument("target", help="'sharegpt' (its cached copy) or a file path")
    where = actions.add_parser(
        "path", help="print where the cached file lives", argument_default=argparse.SUPPRESS
    )
    where.add_argument("name", choices=["sharegpt"])
    for action, body, model in (
        (fetch, _fetch, DatasetFlags),
        (check, _verify, DatasetVerifyFlags),
        (where, _path, DatasetFlags),
    ):
        action.add_argument("--catalog-dir", help="another catalog directory")
        bind(action, _handler(body, model))


def _listing(parser: argparse.ArgumentParser) -> Handler:
    def handle(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    return handle


def _handler(body: Callable[[Any, CatalogEntry], None], model: type[Flags]) -> Handler:
    def handle(args: argparse.Namespace) -> int:
        return with_flags(args, model, lambda flags: _guarded(body, flags))

    return handle


def _guarded(body: Callable[[Flags, CatalogEntry], None], flags: Flags) -> int:
    try:
        body(flags, load_entry("sharegpt", flags.catalog_dir))
    except InferlabError as exc:
        report_error(exc)
        return EXIT_FAILED
    return 0


def _path(flags: DatasetFlags, entry: CatalogEntry) -> None:
    print(cached_path(entry.sha256))


def _fetch(flags: DatasetFlags, entry: CatalogEntry) -> None:
    got = acquire(entry, cached_path(entry.sha256), stderr_progress())
    print(f"{got.path} ({got.origin}, sha256 {got.sha256} verified)")


def _verify(flags: DatasetVerifyFlags, entry: CatalogEntry) -> None:
    target = flags.target
    path = cached_path(entry.sha256) if target == "sharegpt" else Path(target)
    if not path.is_file():
        raise DatasetError(
            f"{path}: not present", hint="run `inferlab-bench dataset fetch sharegpt`"
        )
    verify(str(path), entry.sha256, file_sha256(path))
    print(f"{path}: sha256 {entry.sha256} OK")

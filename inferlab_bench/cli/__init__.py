"""The ``inferlab-bench`` command: one module per subcommand, no logic of its own."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

# transformers' "PyTorch was not found" advice is noise here (we only use tokenizers); set
# before anything imports transformers, and inherited by AIPerf's subprocess.
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

from inferlab_bench import __version__

COMMANDS = (
    "handshake",
    "prepare",
    "case",
    "run",
    "sweep",
    "capacity",
    "report",
    "compare",
    "bundle",
    "reproduce",
    "demo",
    "dataset",
    "simulate",
)
"""Subcommand names; each is the module ``inferlab_bench.cli.<name>``, imported only when
the parser needs it (the case stage alone imports AIPerf's models, scipy, ...: about a
second that ``prepare`` would otherwise pay)."""


def _command(name: str) -> ModuleType:
    return importlib.import_module(f"inferlab_bench.cli.{name}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or, with ``only``, just that subcommand (same flags)."""
    from inferlab_bench.cli.flags import FlagParser

    parser = FlagParser(
        prog="inferlab-bench",
        description="Exact, reproducible benchmarks of LLM inference servers, driven by AIPerf.",
    )
    parser.add_argument("--version", action="version", version=f"inferlab-bench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        _command(name).register(sub)
    return parser


def translate_legacy(argv: Sequence[str]) -> list[str]:
    """Map the older flag form onto subcommands.

    ``--handshake`` -> ``handshake``; ``--prepare --input A --output B`` -> ``prepare ...``;
    a bare ``--input A --output B`` -> ``case ...``.
    """
    args = list(argv)
    if not args or not args[0].startswith("--") or args[0] in ("--help", "-h", "--version"):
        return args
    if "--handshake" in args:
        return ["handshake", *(a for a in args if a != "--handshake")]
    if "--prepare" in args:
        return ["prepare", *(a for a in args if a != "--prepare")]
    if "--input" in args or any(a.startswith("--input=") for a in args):
        return ["case", *args]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args_list = translate_legacy(sys.argv[1:] if argv is None else argv)
    named = args_list[0] if args_list and args_list[0] in COMMANDS else None
    parser = build_parser(only=named)
    from inferlab_bench.cli.flags import check_known, refuse_unknown

    check_known(parser, args_list)
    args, extra = parser.parse_known_args(args_list)
    if extra:
        refuse_unknown(parser, (args.command, getattr(args, "action", None)), extra)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return 2
    code: int = args.handler(args)
    return code


def entry() -> int:
    """The installed ``inferlab-bench`` command and ``python -m inferlab_bench``."""
    return main()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(entry())

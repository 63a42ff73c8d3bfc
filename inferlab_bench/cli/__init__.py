"""The ``inferlab-bench`` command: one module per subcommand, no logic of its own."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

# transformers' "PyTorch was not found" advice is noise here (we only use tokenizers); set
# before anything imports transformers, and inherited by AIPerf's subprocess.
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

from inferlab_bench import __version__
from inferlab_bench.cli import (
    bundle,
    case,
    compare,
    dataset,
    demo,
    handshake,
    prepare,
    report,
    reproduce,
    run,
    simulate,
    sweep,
)
from inferlab_bench.cli.flags import FlagParser

COMMANDS = (
    handshake,
    prepare,
    case,
    run,
    sweep,
    report,
    compare,
    bundle,
    reproduce,
    demo,
    dataset,
    simulate,
)


def build_parser() -> argparse.ArgumentParser:
    parser = FlagParser(
        prog="inferlab-bench",
        description="Exact, reproducible benchmarks of LLM inference servers, driven by AIPerf.",
    )
    parser.add_argument("--version", action="version", version=f"inferlab-bench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
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
    parser = build_parser()
    args = parser.parse_args(args_list)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return 2
    code: int = args.handler(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

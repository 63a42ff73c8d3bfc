"""Console output for human commands: tables to stdout, one-line errors to stderr."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import orjson

from inferlab_bench.cli.wording import in_flag_words
from inferlab_bench.errors import InferlabError

if TYPE_CHECKING:  # rich is imported only by commands that draw tables
    from rich.console import Console, RenderableType

EXIT_FAILED = 1
EXIT_USAGE = 2


def stdout_console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 140)


def show(*renderables: RenderableType) -> None:
    console = stdout_console()
    for renderable in renderables:
        console.print(renderable)


def print_json(data: object) -> None:
    sys.stdout.write(
        orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"
    )


def report_error(exc: InferlabError) -> int:
    """One clear line (and the hint) on stderr; the exit code for a failed human command."""
    hint = f" (hint: {exc.hint})" if exc.hint else ""
    print(f"inferlab-bench: error: {in_flag_words(exc.message + hint)}", file=sys.stderr)
    return EXIT_FAILED

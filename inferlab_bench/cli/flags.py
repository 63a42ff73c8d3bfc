"""The CLI's edge: argparse namespace -> validated flag model, or one line naming the flag, exit 2.

The field -> flag table is read off each parser's own argument definitions (``dest`` ->
``--flag``), so a model field and its flag cannot drift apart unnoticed.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from inferlab_bench.cli.wording import RULE_ERROR, describe, in_flag_words
from inferlab_bench.errors import ConfigurationError, InferlabError

EXIT_USAGE = 2
TABLE_KEY = "flag_table"
ModelT = TypeVar("ModelT", bound=BaseModel)


class FlagParser(argparse.ArgumentParser):
    """argparse whose own mistakes (unknown flag, missing flag, bad choice) are one line, exit 2."""

    def error(self, message: str, hint: str = "") -> NoReturn:
        self.exit(
            EXIT_USAGE,
            f"inferlab-bench: error: {message} (hint: {hint}see `{self.prog} --help`)\n",
        )


def check_known(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Before argparse: a ``--flag`` the command does not have (nor abbreviates) is refused
    first, with its closest flag; else argparse would ask for the required flag it hides
    (``--tokeniser`` -> "the following arguments are required: --tokenizer")."""
    path = [word for word in argv[:2] if not word.startswith("-")]
    known = _long_flags(_leaf(parser, path))
    unknown = [
        word
        for word in argv
        if word.startswith("--")
        and word != "--"
        and not any(k.startswith(word.split("=", 1)[0]) for k in known)
    ]
    if unknown:
        refuse_unknown(parser, path, unknown)


def refuse_unknown(
    parser: argparse.ArgumentParser, path: Sequence[str | None], extra: Sequence[str]
) -> NoReturn:
    """Unknown arguments, said by the (sub)command that got them (``path``: its words), with
    the closest flag it has: ``--concurency`` -> did you mean --concurrency?"""
    leaf = _leaf(parser, path)
    known = _long_flags(leaf)
    guesses = []
    for word in extra:
        if word.startswith("--"):
            close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.6)
            guesses += [f"did you mean {close[0]} (for {word})? " for _ in close[:1]]
    message = f"unrecognized arguments: {' '.join(extra)}"
    if isinstance(leaf, FlagParser):
        leaf.error(message, "".join(guesses[:3]))
    leaf.error(message)


def _leaf(parser: argparse.ArgumentParser, path: Sequence[str | None]) -> argparse.ArgumentParser:
    for word in path:
        parser = _subparser(parser, word) or parser
    return parser


def _long_flags(parser: argparse.ArgumentParser) -> list[str]:
    return [o for a in parser._actions for o in a.option_strings if o.startswith("--")]


def _subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            found: argparse.ArgumentParser = action.choices[name]
            return found
    return None


@dataclass(frozen=True)
class FlagTable:
    """One parser's flags: dest -> how a person types it, and its help (the hint)."""

    prog: str
    flags: Mapping[str, str]
    helps: Mapping[str, str]

    def name(self, loc: tuple[int | str, ...]) -> str:
        """The flag a pydantic location points at (its first part that is a dest)."""
        for part in loc:
            if isinstance(part, str) and part in self.flags:
                return self.flags[part]
        return ".".join(str(p) for p in loc) or self.prog

    def hint(self, error: ErrorDetails) -> str:
        if error["type"] == RULE_ERROR:
            ctx = error.get("ctx") or {}
            if ctx.get("hint"):
                return str(ctx["hint"])
            dests = list(ctx.get("fields", ()))
        else:
            dests = [p for p in error["loc"] if isinstance(p, str)]
        for dest in dests:
            if self.helps.get(dest):
                return f"{self.flags[dest]}: {self.helps[dest]}; see `{self.prog} --help`"
        return f"see `{self.prog} --help`"


def flag_table(parser: argparse.ArgumentParser) -> FlagTable:
    """Read the table off a parser whose arguments are all defined."""
    flags: dict[str, str] = {}
    helps: dict[str, str] = {}
    for action in parser._actions:
        if action.dest in (argparse.SUPPRESS, "help") or isinstance(
            action, argparse._SubParsersAction
        ):
            continue
        longs = [o for o in action.option_strings if o.startswith("--")]
        flags[action.dest] = longs[0] if longs else action.dest.upper()
        helps[action.dest] = action.help or ""
    return FlagTable(parser.prog, flags, helps)


def bind(parser: argparse.ArgumentParser, handler: Callable[[argparse.Namespace], int]) -> None:
    """The last step of defining a command: its handler and its flag table."""
    parser.set_defaults(handler=handler, **{TABLE_KEY: flag_table(parser)})


def parse_flags(model: type[ModelT], args: argparse.Namespace) -> ModelT:
    """Validate the given flags (absent ones take the model's defaults) into ``model``."""
    table: FlagTable = getattr(args, TABLE_KEY)
    values = {dest: value for dest, value in vars(args).items() if dest in table.flags}
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        text = describe(error, table.name, integer=_integer_field(model, error["loc"]))
        raise ConfigurationError(text, hint=table.hint(error)) from exc


def usage_error(exc: InferlabError) -> int:
    """One line on stderr (message and hint); exit code 2."""
    hint = f" (hint: {exc.hint})" if exc.hint else ""
    print(f"inferlab-bench: error: {in_flag_words(exc.message + hint)}", file=sys.stderr)
    return EXIT_USAGE


def check_run_size(advice: list[str], *, strict: bool) -> None:
    """Say before starting what the request count cannot support; ``--strict`` refuses."""
    if advice and strict:
        raise ConfigurationError(
            "; ".join(advice), hint="raise --requests, or run without --strict to go ahead"
        )
    for line in advice:
        print(f"inferlab-bench: warning: {line}", file=sys.stderr)


def with_flags(args: argparse.Namespace, model: type[ModelT], body: Callable[[ModelT], int]) -> int:
    """Validate, then run ``body``; a bad flag is one line and exit 2, before anything starts."""
    try:
        flags = parse_flags(model, args)
    except ConfigurationError as exc:
        return usage_error(exc)
    return body(flags)


def default_of(model: type[BaseModel], field: str) -> str:
    """A field's default as a help text says it (``default 3600``): the model is its one source."""
    value = model.model_fields[field].get_default(call_default_factory=True)
    if isinstance(value, list):
        shown = ",".join(str(item) for item in value)
    elif isinstance(value, float) and value.is_integer():
        shown = str(int(value))
    else:
        shown = str(value)
    return f"default {shown}"


def _integer_field(model: type[BaseModel], loc: tuple[int | str, ...]) -> bool | None:
    """Whether the field at ``loc`` holds integers (for ``expected an integer >= 1``)."""
    if not loc or not isinstance(loc[0], str) or loc[0] not in model.model_fields:
        return None
    return _holds_int(model.model_fields[loc[0]].annotation)


def _holds_int(annotation: Any) -> bool | None:
    if annotation is int:
        return True
    if annotation is float:
        return False
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, typing.Annotated):
        for arg in typing.get_args(annotation):
            if (found := _holds_int(arg)) is not None:
                return found
    return None

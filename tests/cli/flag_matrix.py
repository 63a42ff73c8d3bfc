"""Every human command's flags x each kind of bad value, generated from the parsers and models.

A command contributes a valid base command line (the anchor); every variant changes one
thing: one flag's value (its bad values come from the flag's model field: bounds, kind
marker, list items, choices), one broken rule of the model's ``RULES``, a flag without its
value, or an unknown flag. ``run_variant`` runs one in-process with every stage replaced by
a tripwire, so an accepted bad value fails loudly instead of starting a benchmark.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotated_types import Ge, Gt, Le, Lt, MinLen
from pydantic import BaseModel

from inferlab_bench.cli import build_parser, main, options
from inferlab_bench.cli.flagvalues import Kind
from inferlab_bench.cli.rules import GOOD
from inferlab_bench.cli.simulate import SimulateCommandFlags

# Every call that would start work, per CLI module: a variant that reaches one was accepted.
STAGES = {
    "inferlab_bench.cli.run": ("run_and_save", "run_trials", "dry_run", "KubeEngine"),
    "inferlab_bench.cli.sweep": ("run_sweep", "dry_run", "sweep_requests", "KubeEngine"),
    "inferlab_bench.prepare.stage": ("run_prepare",),  # JSON mode imports it late
    "inferlab_bench.runs.prepare": ("prepare_and_save", "local_file"),
    "inferlab_bench.cli.case": ("run_json_command",),
    "inferlab_bench.cli.simulate": ("running_simulator",),
    "inferlab_bench.cli.dataset": ("acquire", "load_entry"),
    "inferlab_bench.cli.report": ("find_cases",),
    "inferlab_bench.cli.compare": ("load_trials",),
    "inferlab_bench.cli.demo": ("run_demo",),
    "inferlab_bench.cli.capacity": ("run_capacity", "run_json_command"),
    "inferlab_bench.cli.bundle": ("write_bundle", "read_bundle"),
    "inferlab_bench.cli.reproduce": ("reproduce",),
}


class Started(BaseException):
    """Raised by a tripwire: the command got past its flags and started work."""


@dataclass(frozen=True)
class Files:
    """Real paths the variants point at, all under one private directory."""

    root: Path

    @property
    def directory(self) -> Path:
        return self.root / "dir"

    @property
    def file(self) -> Path:
        return self.root / "file.json"

    @property
    def fifo(self) -> Path:
        return self.root / "fifo"

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def missing(self) -> Path:
        return self.root / "missing" / "nothing.json"

    @property
    def under_file(self) -> Path:
        return self.file / "below"

    def make(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.file.exists():
            self.file.write_text("{}\n")
        if not self.fifo.exists():
            os.mkfifo(self.fifo)


@dataclass(frozen=True)
class Command:
    """One human command: its words, its flag model and a valid base (dest -> value)."""

    words: tuple[str, ...]
    model: type[BaseModel]
    base: Callable[[Files], dict[str, Any]]


def _case_base(files: Files, **load: str) -> dict[str, Any]:
    return {
        "url": ["http://127.0.0.1:9"],
        "model": "m",
        "tokenizer": str(files.directory),
        "requests": "4",
        "out": str(files.out),
        "random_input_tokens": "8",
        "random_output_tokens": "4",
        **load,
    }


COMMANDS = (
    Command(("run",), options.RunFlags, lambda f: _case_base(f, concurrency="2")),
    Command(("sweep",), options.SweepFlags, lambda f: _case_base(f, concurrency="1,2")),
    Command(
        ("capacity",),
        options.CapacityFlags,
        lambda f: _case_base(f, concurrency_range="1:2", slo_ttft_ms="100"),
    ),
    Command(
        ("capacity-json",),
        options.CapacityJsonFlags,
        lambda f: {"input": str(f.file), "output": str(f.out / "result.json")},
    ),
    Command(
        ("prepare",),
        options.PrepareFlags,
        lambda f: {
            "model": str(f.directory),
            "dataset": str(f.file),
            "entries": "2",
            "max_input_tokens": "64",
            "out": str(f.out),
        },
    ),
    Command(
        ("case",),
        options.CaseCommandFlags,
        lambda f: {"input": str(f.file), "output": str(f.out / "result.json")},
    ),
    Command(("simulate",), SimulateCommandFlags, lambda f: {"port": "0"}),
    Command(("dataset", "fetch"), options.DatasetFlags, lambda f: {"name": "sharegpt"}),
    Command(("dataset", "verify"), options.DatasetVerifyFlags, lambda f: {"target": str(f.file)}),
    Command(("dataset", "path"), options.DatasetFlags, lambda f: {"name": "sharegpt"}),
    Command(("report",), options.ReportFlags, lambda f: {"directory": str(f.directory)}),
    Command(
        ("compare",), options.CompareFlags, lambda f: {"a": str(f.directory), "b": str(f.file)}
    ),
    Command(
        ("bundle",),
        options.BundleFlags,
        lambda f: {"directory": str(f.directory), "out": str(f.out / "b.tar.gz")},
    ),
    Command(
        ("reproduce",),
        options.ReproduceFlags,
        lambda f: {
            "bundle": str(f.file),
            "url": "http://127.0.0.1:9",
            "model": "m",
            "tokenizer": str(f.directory),
            "out": str(f.out),
        },
    ),
    Command(
        ("demo",),
        options.DemoFlags,
        lambda f: {"out": str(f.out), "requests": "4", "concurrency": "1,2"},
    ),
)


@dataclass(frozen=True)
class Variant:
    command: str
    kind: str
    names: tuple[str, ...]
    """Flags of which the error line must name one (e.g. ``--concurrency``)."""
    argv: tuple[str, ...]
    subprocess_ok: bool = True

    @property
    def id(self) -> str:
        return f"{self.command}:{'/'.join(self.names)}:{self.kind}"


@dataclass
class Shape:
    """What a field holds, read off its annotation: base type, bounds, kind marker, items."""

    base: Any = None
    kind: str | None = None
    bounds: dict[str, Any] = field(default_factory=dict)
    item: Shape | None = None
    choices: tuple[Any, ...] = ()


def shape_of(annotation: Any, metadata: list[Any] = []) -> Shape:  # noqa: B006 (read only)
    found = Shape()
    _collect(found, metadata)
    _walk(found, annotation)
    return found


def _collect(found: Shape, metadata: list[Any]) -> None:
    for item in metadata:
        if isinstance(item, Kind):
            found.kind = item.name
        elif isinstance(item, Ge | Gt | Le | Lt | MinLen):
            for key in ("ge", "gt", "le", "lt", "min_length"):
                if hasattr(item, key):
                    found.bounds[key] = getattr(item, key)
        elif hasattr(item, "metadata"):
            _collect(found, list(item.metadata))


def _walk(found: Shape, annotation: Any) -> None:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *metadata = typing.get_args(annotation)
        _collect(found, metadata)
        _walk(found, base)
    elif origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                _walk(found, arg)
    elif origin is list:
        found.base = list
        found.item = shape_of(typing.get_args(annotation)[0])
    elif origin is typing.Literal:
        found.base, found.choices = str, typing.get_args(annotation)
    else:
        found.base = annotation


def bad_values(shape: Shape, files: Files) -> Iterator[tuple[str, str]]:
    """(kind, value) pairs a flag of this shape must refuse."""
    if shape.base is list:
        assert shape.item is not None
        yield "empty list", ""
        for kind, value in bad_values(shape.item, files):
            if value and "," not in value:
                yield kind, value
                yield f"list item {kind}", f"1,{value}"
        return
    if shape.base in (int, float):
        yield from _bad_numbers(shape)
        return
    by_kind: dict[str | None, list[tuple[str, str]]] = {
        "existing_file": [
            ("missing file", str(files.missing)),
            ("directory for a file", str(files.directory)),
            ("fifo for a file", str(files.fifo)),
        ],
        "existing_dir": [
            ("missing directory", str(files.missing)),
            ("file for a directory", str(files.file)),
        ],
        "existing_path": [("missing path", str(files.missing))],
        "writable_dir": [
            ("file for a directory", str(files.file)),
            ("directory under a file", str(files.under_file)),
        ],
        "writable_file": [
            ("directory for a file", str(files.directory)),
            ("file under a file", str(files.under_file)),
        ],
        "url": [
            ("not http", "ftp://host:1"),
            ("port out of range", "http://host:99999"),
            ("spaces, not a URL", "not a url"),
        ],
        "url_path": [("no leading slash", "v1/chat"), ("spaces in path", "/v1/a b")],
        "json_object": [
            ("JSON list", "[1]"),
            ("invalid JSON", "{bad"),
            ("null value", '{"a":null}'),
        ],
        "reset": [("unknown reset", "bogus")],
        "count_range": [
            ("one number", "4"),
            ("reversed range", "8:2"),
            ("zero in range", "0:4"),
            ("non-integer range", "1.5:4"),
            ("three parts", "1:2:3"),
        ],
        "rate_range": [
            ("one number", "4"),
            ("reversed range", "8:2"),
            ("infinite range", "1:inf"),
            ("NaN in range", "nan:2"),
            ("below the rate step", "0.001:1"),
        ],
        "dataset": [("missing file", str(files.missing)), ("directory", str(files.directory))],
    }
    yield from by_kind.get(shape.kind, [])
    if shape.base in (str, Path) and not shape.choices:
        yield "empty", ""
        yield "NUL", "a\x00b"


def _bad_numbers(shape: Shape) -> Iterator[tuple[str, str]]:
    integer = shape.base is int
    yield "non-numeric", "abc"
    if integer:
        yield "non-integer", "1.5"
        yield "exponent", "1e9"
    else:
        yield "NaN", "nan"
        yield "infinity", "inf"
    low = shape.bounds.get("ge", shape.bounds.get("gt"))
    if low is not None:
        if low >= 0:
            yield "negative", "-1"
        if low > 0 or "gt" in shape.bounds:
            yield "zero", "0"
        if not integer and low > 0:
            yield "a sliver above zero, below the bound", repr(low / 1000)
    high = shape.bounds.get("le", shape.bounds.get("lt"))
    if high is not None:
        over = int(high) + 1 if integer else high * 10 if high else 1
        yield "above the bound", str(over)
        yield "huge", "9" * 40


def good_value(shape: Shape, files: Files) -> str:
    """A value this shape accepts (for rules that need a flag to be given)."""
    if shape.base is list:
        return "1"
    if shape.choices:
        return "kube" if "kube" in shape.choices else str(shape.choices[0])
    if shape.base is int:
        return "2"
    if shape.base is float:
        return "0.5"
    paths = {
        "existing_file": files.file,
        "existing_dir": files.directory,
        "existing_path": files.file,
        "writable_dir": files.out,
        "writable_file": files.out / "x",
    }
    if shape.kind in paths:
        return str(paths[shape.kind])
    return {
        "url": "http://127.0.0.1:9",
        "json_object": "{}",
        "reset": "none",
        "count_range": "1:2",
        "rate_range": "0.5:2",
    }.get(shape.kind or "", "x")


def leaf_parser(words: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {
        a.dest: a
        for a in parser._actions
        if a.dest not in ("help", argparse.SUPPRESS)
        and not isinstance(a, argparse._SubParsersAction)
    }


def flag_name(action: argparse.Action) -> str:
    longs = [o for o in action.option_strings if o.startswith("--")]
    return longs[0] if longs else action.dest.upper()


def command_line(parser: argparse.ArgumentParser, values: Mapping[str, Any]) -> list[str]:
    """Positionals in order, then each flag with its value (a list repeats the flag)."""
    actions = _actions(parser)
    argv: list[str] = []
    for dest, action in actions.items():
        if not action.option_strings and dest in values:
            argv.append(str(values[dest]))
    for dest, value in values.items():
        action = actions[dest]
        if not action.option_strings:
            continue
        if value is True:
            argv.append(flag_name(action))
        else:
            for item in value if isinstance(value, list) else [value]:
                argv += [flag_name(action), str(item)]
    return argv


def takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0 and not isinstance(action, argparse.BooleanOptionalAction)


def variants(files: Files) -> list[Variant]:
    found: list[Variant] = []
    for command in COMMANDS:
        found += command_variants(command, files)
    return found


def command_variants(command: Command, files: Files) -> list[Variant]:
    parser = leaf_parser(command.words)
    actions = _actions(parser)
    base = command.base(files)
    name = " ".join(command.words)

    def make(
        kind: str, values: Mapping[str, Any], *names: str, tail: tuple[str, ...] = ()
    ) -> Variant:
        argv = (*command.words, *command_line(parser, values), *tail)
        return Variant(name, kind, names, argv, subprocess_ok=not any("\x00" in a for a in argv))

    found: list[Variant] = []
    for dest, action in actions.items():
        if dest not in command.model.model_fields or not takes_value(action):
            continue
        info = command.model.model_fields[dest]
        shape = shape_of(info.annotation, list(info.metadata))
        if isinstance(action, argparse._AppendAction) and shape.item is not None:
            shape = shape.item  # a repeated flag: each occurrence is one item
        bad = [("unknown choice", "bogus")] if action.choices else list(bad_values(shape, files))
        for kind, value in bad:
            found.append(make(kind, {**base, dest: value}, flag_name(action)))
        if action.option_strings:
            found.append(make("no value", base, flag_name(action), tail=(flag_name(action),)))
    found.append(make("unknown flag", base, "--no-such-flag", tail=("--no-such-flag",)))
    for rule in getattr(command.model, "RULES", ()):
        values, names = _broken(rule.violation(), base, actions, command.model, files)
        found.append(make(f"rule {type(rule).__name__}", values, *names))
    return found


def _broken(
    violation: Mapping[str, str | None],
    base: Mapping[str, Any],
    actions: Mapping[str, argparse.Action],
    model: type[BaseModel],
    files: Files,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    values = dict(base)
    for dest, value in violation.items():
        if value is None:
            values.pop(dest, None)
        elif value == "<twice>":
            values[dest] = [*values[dest], *values[dest]]
        elif value == GOOD:
            action = actions[dest]
            if not takes_value(action):
                values[dest] = True
            else:
                info = model.model_fields[dest]
                values[dest] = good_value(shape_of(info.annotation, list(info.metadata)), files)
        else:
            values[dest] = value
    return values, tuple(flag_name(actions[d]) for d in violation)


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str
    started: bool
    escaped: str
    """The exception that escaped ``main`` (a traceback at a terminal), or empty."""


def run_variant(variant: Variant, patch: Callable[[Any, str, Any], None]) -> Outcome:
    """Run ``main(argv)`` in-process with every stage a tripwire; ``patch`` sets attributes."""
    import importlib

    def tripwire(*args: object, **kwargs: object) -> typing.NoReturn:
        raise Started

    for module_name, names in STAGES.items():
        module = importlib.import_module(module_name)
        for attr in names:
            # A renamed stage must not silently disarm its tripwire.
            assert hasattr(module, attr), f"{module_name}.{attr} is gone: update STAGES"
            patch(module, attr, tripwire)
    out, err = io.StringIO(), io.StringIO()
    code, started, escaped = 0, False, ""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(variant.argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except Started:
            started = True
        except Exception as exc:  # what a person would see as a traceback
            escaped = f"{type(exc).__name__}: {exc}"
    return Outcome(code, out.getvalue(), err.getvalue(), started, escaped)


def problems(variant: Variant, outcome: Outcome) -> list[str]:
    """What is wrong with how the CLI answered a bad command line (empty: all good)."""
    found = []
    if outcome.escaped or "Traceback" in outcome.err:
        found.append(f"traceback ({outcome.escaped})")
    if outcome.started:
        found.append("accepted: a stage started")
    elif outcome.code != 2:
        found.append(f"exit code {outcome.code}")
    lines = outcome.err.splitlines()
    if len(lines) != 1:
        found.append(f"{len(lines)} stderr lines")
    elif not any(name.lower() in lines[0].lower() for name in variant.names):
        found.append(f"does not name {'/'.join(variant.names)}")
    if outcome.out:
        found.append("printed to stdout")
    return found

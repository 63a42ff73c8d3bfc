"""A peer's file as parsed documents: JSON, JSON Lines or YAML, UTF-8, with its size capped
and YAML's aliases refused, so that a hostile file cannot cost more than its bytes."""

from __future__ import annotations

import json
import math
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from inferlab_bench.errors import BaselineError

MAX_BYTES = 256 * 1024 * 1024
"""Chosen: the largest real peer file we know is a 3.8 MB vLLM file of 100k requests."""
MAX_LINES = 100_000
_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


@dataclass(frozen=True)
class Documents:
    syntax: str
    """``json``, ``jsonl`` or ``yaml``."""
    items: tuple[Any, ...]


def read_documents(path: Path, max_bytes: int = MAX_BYTES) -> Documents:
    """Every document in ``path``; a BaselineError naming the file for anything unreadable."""
    text = _text(path, max_bytes)
    stripped = text.lstrip()
    if not stripped:
        raise BaselineError(f"{path}: the file is empty", hint="pass the file the tool wrote")
    if stripped[0] in "{[":
        try:
            return Documents("json", (_json(stripped),))
        except ValueError as exc:
            lines = [line for line in stripped.splitlines() if line.strip()]
            if len(lines) < 2 or not all(line.lstrip().startswith("{") for line in lines):
                raise BaselineError(f"{path}: not valid JSON ({_reason(exc)})") from None
            return Documents("jsonl", _json_lines(path, lines))
    return Documents("yaml", (_yaml(path, text),))


def _text(path: Path, max_bytes: int) -> str:
    try:
        status = path.stat()
        if not stat.S_ISREG(status.st_mode):
            raise BaselineError(
                f"{path}: not a regular file", hint="pass the result file the tool wrote"
            )
        size = status.st_size
        if size > max_bytes:
            raise BaselineError(
                f"{path}: {size} bytes, more than the {max_bytes} bytes a result file may have",
                hint="pass one result file, not an archive or a log",
            )
        with path.open("rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if len(raw) > max_bytes:
        raise BaselineError(f"{path}: more than the {max_bytes} bytes a result file may have")
    for bom, name in _BOMS:
        if raw.startswith(bom):
            raise BaselineError(
                f"{path}: encoded as {name}; result files are UTF-8",
                hint="re-save it as UTF-8 (iconv -f UTF-16 -t UTF-8)",
            )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BaselineError(
            f"{path}: not UTF-8 (byte {exc.start}: {raw[exc.start : exc.start + 1]!r})",
            hint="result files are UTF-8 JSON or YAML",
        ) from None


def _json(text: str) -> Any:
    """orjson first (fast, depth-limited); Python's parser for the ``Infinity``/``NaN`` literals
    SGLang and vLLM write, which orjson refuses."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if "recursion" in str(exc):
            raise ValueError("nested more than 1024 levels deep") from None
        try:
            return json.loads(text, parse_constant=_constant)
        except RecursionError:
            raise ValueError("nested too deep") from None
        except json.JSONDecodeError as inner:
            raise ValueError(f"line {inner.lineno} column {inner.colno}: {inner.msg}") from None


def _constant(name: str) -> float:
    return {"Infinity": math.inf, "-Infinity": -math.inf}.get(name, math.nan)


def _json_lines(path: Path, lines: list[str]) -> tuple[Any, ...]:
    if len(lines) > MAX_LINES:
        raise BaselineError(f"{path}: {len(lines)} lines, more than the {MAX_LINES} read")
    out = []
    for number, line in enumerate(lines, start=1):
        try:
            out.append(_json(line))
        except ValueError as exc:
            raise BaselineError(f"{path}: line {number} is not valid JSON ({exc})") from None
    return tuple(out)


def _reason(exc: ValueError) -> str:
    return str(exc).splitlines()[0][:120]


class _NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]
    """YAML without anchors and aliases: an alias bomb expands a few bytes into gigabytes."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not read in result files", event.start_mark
            )
        return super().compose_node(parent, index)


def _yaml(path: Path, text: str) -> Any:
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 (a safe loader subclass)
    except RecursionError:
        raise BaselineError(f"{path}: YAML nested too deep") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BaselineError(
            f"{path}: neither JSON nor valid YAML{where}: {problem}",
            hint="pass the JSON or YAML file the tool wrote",
        ) from None

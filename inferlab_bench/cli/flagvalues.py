"""The kinds of value a flag takes: bounded numbers, paths of a given kind, URLs, JSON, lists.

Each kind is an ``Annotated`` type whose metadata carries a ``Kind`` marker, so that a test
can generate the bad values of every flag from the option models alone.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import orjson
from pydantic import AfterValidator, BeforeValidator, Field, ValidationError
from pydantic_core import PydanticCustomError

from inferlab_bench.case.connections import OPTION_HELP as CONNECTIONS_HELP
from inferlab_bench.case.connections import parse_option as parse_connections_option
from inferlab_bench.case.reset import OPTION_HELP, parse_reset_option
from inferlab_bench.cli.wording import VALUE_ERROR
from inferlab_bench.errors import ConfigurationError
from inferlab_bench.protocol import SETTING_VALUE_ADAPTER

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
MAX_TOKENS = 1_048_576
"""Longer than any model's context: a synthetic prompt or output beyond this is a typo."""
MAX_RATE = 1_000_000.0
"""Requests per second no single client machine can send; above it the flag is a typo."""
MIN_BUDGET_SECONDS = 1.0
"""The protocol counts the case's timeout in whole seconds, at least one."""
MAX_BUDGET_SECONDS = 10_000_000.0
MAX_TRIALS = 1000
MAX_WORKERS = 10_000


@dataclass(frozen=True)
class Kind:
    """Marker in a flag type's metadata: which kind of value it is (``existing_file``...)."""

    name: str


def refuse(expected: str) -> PydanticCustomError:
    """Our own value error; ``expected`` reads as ``expected ...``."""
    return PydanticCustomError(VALUE_ERROR, "{expected}", {"expected": expected})


def _text(value: Any) -> Any:
    if isinstance(value, str):
        if not value:
            raise refuse("expected a non-empty value")
        if "\x00" in value:
            raise refuse("expected text without NUL characters")
    return value


def _existing_file(path: Path) -> Path:
    if not path.exists():
        raise refuse("expected an existing file; nothing is at this path")
    if path.is_dir():
        raise refuse("expected a file, not a directory")
    if not path.is_file():
        raise refuse("expected a regular file, not a device, FIFO or socket")
    if not os.access(path, os.R_OK):
        raise refuse("expected a readable file; no permission to read it")
    return path


def _existing_dir(path: Path) -> Path:
    if not path.exists():
        raise refuse("expected an existing directory; nothing is at this path")
    if not path.is_dir():
        raise refuse("expected a directory, not a file")
    return path


def _existing_path(path: Path) -> Path:
    if not path.exists():
        raise refuse("expected an existing file or directory; nothing is at this path")
    return path


def _writable_dir(path: Path) -> Path:
    """A directory we may write into: existing, or creatable under an existing directory."""
    if path.exists():
        if not path.is_dir():
            raise refuse("expected a directory to write into, not a file")
        return path
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise refuse(f"expected a directory to write into ({parent} is not a directory)")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise refuse(f"expected a directory to write into (no permission in {parent})")
            break
    return path


def _writable_file(path: Path) -> Path:
    if path.is_dir():
        raise refuse("expected a file to write, not a directory")
    if path.exists() and not path.is_file():
        raise refuse("expected a regular file to write, not a device, FIFO or socket")
    _writable_dir(path.parent)
    return path


def _url(text: str) -> str:
    parts = urlsplit(text if "://" in text else f"http://{text}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not _is_host(host) or port == -1:
        raise refuse("expected http://HOST:PORT (a port 0-65535)")
    return text


def _server_url(text: str) -> str:
    """The server under test: plain HTTP (the protocol's endpoint has no TLS), a host name."""
    _url(text)
    if text.startswith("https://"):
        raise refuse("expected http://HOST:PORT (the protocol's endpoint is plain HTTP)")
    return text


def _is_host(host: str) -> bool:
    """A host name or address as the protocol's endpoint takes it (no spaces or / ? # @)."""
    return bool(host) and not any(ch.isspace() or ch in "/?#@" for ch in host)


def _url_path(text: str) -> str:
    if not text.startswith("/") or any(ch.isspace() for ch in text):
        raise refuse("expected a URL path starting with '/', without spaces")
    return text


def _json_object(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise refuse(f"expected a JSON object (not valid JSON: {exc})") from exc
    if not isinstance(value, dict):
        raise refuse("expected a JSON object")
    for key, item in value.items():
        try:
            SETTING_VALUE_ADAPTER.validate_python(item, strict=True)
        except ValidationError as exc:
            raise refuse(f"expected a JSON object without null (key {key!r})") from exc
    return value


def _parsed_by(parse: Callable[[str], object], expected: str) -> Callable[[str], str]:
    """A check that the option's own parser accepts the text (one set of rules, not two)."""

    def check(text: str) -> str:
        try:
            parse(text)
        except ConfigurationError as exc:
            raise refuse(f"expected {expected}") from exc
        return text

    return check


def _dataset(text: str) -> str:
    if text != "sharegpt":
        _existing_file(Path(text))
    return text


def _range(kind: type[int] | type[float], low: float, high: float) -> Callable[[Any], Any]:
    """``LOW:HIGH`` with LOW below HIGH, both within [low, high] (a search's load range)."""
    example = "1:256" if kind is int else "0.5:64"

    def parse(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        expected = f"expected LOW:HIGH with LOW below HIGH, e.g. {example}"
        parts = value.split(":")
        try:
            if len(parts) != 2:
                raise ValueError(value)
            first, second = (kind(p.strip()) for p in parts)
        except ValueError as exc:
            raise refuse(expected) from exc
        if not all(math.isfinite(v) and low <= v <= high for v in (first, second)):
            raise refuse(f"{expected}, each from {low:g} to {high:g}")
        if first >= second:
            raise refuse(expected)
        return (first, second)

    return parse


def _split(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",")] if value.strip() else []
    return value


Text = Annotated[str, Kind("text"), BeforeValidator(_text)]
ExistingFile = Annotated[
    Path, Kind("existing_file"), BeforeValidator(_text), AfterValidator(_existing_file)
]
ExistingDir = Annotated[
    Path, Kind("existing_dir"), BeforeValidator(_text), AfterValidator(_existing_dir)
]
ExistingPath = Annotated[
    Path, Kind("existing_path"), BeforeValidator(_text), AfterValidator(_existing_path)
]
WritableDir = Annotated[
    Path, Kind("writable_dir"), BeforeValidator(_text), AfterValidator(_writable_dir)
]
WritableFile = Annotated[
    Path, Kind("writable_file"), BeforeValidator(_text), AfterValidator(_writable_file)
]
AnyPath = Annotated[Path, Kind("path"), BeforeValidator(_text)]
Url = Annotated[str, Kind("url"), BeforeValidator(_text), AfterValidator(_url)]
ServerUrl = Annotated[str, Kind("url"), BeforeValidator(_text), AfterValidator(_server_url)]
"""The server under test: ``http://HOST:PORT`` (a bare ``HOST:PORT`` reads as http)."""
UrlPath = Annotated[str, Kind("url_path"), BeforeValidator(_text), AfterValidator(_url_path)]
JsonObject = Annotated[dict[str, Any], Kind("json_object"), BeforeValidator(_json_object)]
ResetOption = Annotated[
    str,
    Kind("reset"),
    BeforeValidator(_text),
    AfterValidator(_parsed_by(parse_reset_option, OPTION_HELP)),
]
ConnectionsOption = Annotated[
    str,
    Kind("connections"),
    BeforeValidator(_text),
    AfterValidator(_parsed_by(parse_connections_option, CONNECTIONS_HELP)),
]
DatasetName = Annotated[str, Kind("dataset"), BeforeValidator(_text), AfterValidator(_dataset)]

Count = Annotated[int, Field(ge=1, le=U32_MAX)]
ZeroOrMore = Annotated[int, Field(ge=0, le=U32_MAX)]
Seed = Annotated[int, Field(ge=0, le=U64_MAX)]
Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
Trials = Annotated[int, Field(ge=1, le=MAX_TRIALS)]
Workers = Annotated[int, Field(ge=1, le=MAX_WORKERS)]
Positive = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
Ratio = Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)]
Milliseconds = Annotated[float, Field(ge=0.0, le=3_600_000.0, allow_inf_nan=False)]
Rate = Annotated[float, Field(gt=0.0, le=MAX_RATE, allow_inf_nan=False)]
Budget = Annotated[float, Field(ge=MIN_BUDGET_SECONDS, le=MAX_BUDGET_SECONDS, allow_inf_nan=False)]
CountList = Annotated[list[Count], Kind("list"), BeforeValidator(_split), Field(min_length=1)]
RateList = Annotated[list[Rate], Kind("list"), BeforeValidator(_split), Field(min_length=1)]
CountRange = Annotated[
    tuple[int, int], Kind("count_range"), BeforeValidator(_range(int, 1, U32_MAX))
]
"""``LOW:HIGH`` whole numbers (a concurrency range)."""
RateRange = Annotated[
    tuple[float, float], Kind("rate_range"), BeforeValidator(_range(float, 0.01, MAX_RATE))
]
"""``LOW:HIGH`` requests per second, from 0.01 (a rate range)."""

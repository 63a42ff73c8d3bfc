"""How a validation error is said to a person: ``NAME: expected an integer >= 1 (found '-1')``.

One wording for both edges: the CLI names the flag (``--concurrency``), JSON mode names the
request field (``case.load_shape.concurrency``); what was expected reads the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

RULE_ERROR = "flag_rule"
"""Error type of a rule between several fields; ctx ``fields`` and ``template`` ({0}, {1}...)."""

VALUE_ERROR = "flag_value"
"""Error type of our own value checks (paths, URLs, JSON); the message is the expectation."""

_PLAIN: dict[str, str] = {
    "int_parsing": "expected an integer",
    "int_type": "expected an integer",
    "int_from_float": "expected an integer",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "finite_number": "expected a finite number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected a string",
    "string_too_short": "expected a non-empty value",
    "dict_type": "expected a JSON object",
    "list_type": "expected a list",
    "missing": "required field is missing",
    "extra_forbidden": "unknown field (not in protocol v6)",
    "json_invalid": "not valid JSON",
    "path_type": "expected a path",
}
_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
}


def expectation(error: ErrorDetails, *, integer: bool | None = None) -> str:
    """What was expected, e.g. ``expected an integer >= 1``; ``integer`` says the field's kind
    when the caller knows it (else it is read from the bound)."""
    kind = error["type"]
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    if kind in _BOUNDS:
        sign, key = _BOUNDS[kind]
        bound = ctx[key]
        is_int = isinstance(bound, int) if integer is None else integer
        return f"expected {'an integer' if is_int else 'a number'} {sign} {_number(bound)}"
    if kind in ("literal_error", "enum"):
        return f"expected one of {ctx.get('expected', '')}".rstrip()
    if kind == "too_short":
        count = ctx.get("min_length", 1)
        return f"expected at least {count} value{'s' if count != 1 else ''}"
    if kind == "string_too_long":
        return f"expected at most {ctx.get('max_length')} characters"
    if kind in _PLAIN:
        return _PLAIN[kind]
    return str(error["msg"])


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def found(error: ErrorDetails) -> str:
    """`` (found X)`` for a value that was given; empty for missing values and rules."""
    if error["type"] in ("missing", RULE_ERROR):
        return ""
    text = repr(error.get("input"))
    return f" (found {text if len(text) <= 80 else text[:77] + '...'})"


def describe(
    error: ErrorDetails,
    name: Callable[[tuple[int | str, ...]], str],
    *,
    integer: bool | None = None,
) -> str:
    """One error as ``NAME: expectation (found X)``; ``name`` turns a location into a flag or
    a dotted field path. A rule between fields names each of them through ``name``."""
    if error["type"] == RULE_ERROR:
        ctx = error.get("ctx") or {}
        names = [name((field,)) for field in ctx["fields"]]
        return str(ctx["template"]).format(*names)
    return f"{name(tuple(error['loc']))}: {expectation(error, integer=integer)}{found(error)}"


def describe_fields(exc: ValidationError, limit: int = 5) -> str:
    """Every error of a JSON request as ``field.path: expectation (found X)``, ``; ``-joined."""
    errors = exc.errors()
    parts = [describe(error, _dotted) for error in errors[:limit]]
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "; ".join(parts)


def _dotted(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


# Request fields as a person at a terminal types them. Longest first, so that
# ``warmup_request_count`` is not read as ``warmup_`` + ``request_count``.
FIELD_FLAGS: tuple[tuple[str, str], ...] = (
    ("endpoint.host/port", "--url"),
    ("warmup_request_count", "--warmup"),
    ("request_count", "--requests"),
    ("required_entries", "--entries"),
    ("max_input_tokens", "--max-input-tokens"),
    ("case_budget_seconds", "--budget"),
    ("model.served_name", "--model"),
)
_FIELD_WORDS = re.compile(
    "|".join(rf"(?<![\w./-]){re.escape(field)}(?![\w/])" for field, _ in FIELD_FLAGS)
)


def in_flag_words(text: str) -> str:
    """A stage's message (worded for a JSON request) in the flags of the human commands:
    ``lower request_count / warmup_request_count`` -> ``lower --requests / --warmup``."""
    flags = dict(FIELD_FLAGS)
    return _FIELD_WORDS.sub(lambda match: flags[match.group(0)], text)

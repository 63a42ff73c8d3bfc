"""Chat-template renders without jinja: one probe render per message shape, then assembly.

``apply_chat_template`` per candidate costs more than the tokenizing it feeds. A template's
output for a given shape (the roles in order) is literals around the message contents, as
long as the template asks the same questions of the contents. So each shape is rendered
once with stand-in contents that log every operation the template applies to them; a real
conversation whose contents answer every logged question the same way gets the same
literals around its own contents. Stand-ins that come out altered (escaped, cut, changed)
mean no plan for that shape; ``ChatTokenizer.render`` checks each plan's first use against
a real render and turns plans off for good at the first difference.

Verified plans are kept (``verified_plans`` / ``from_verified``, as tagged JSON) beside the
cached tokenizer, keyed by its fingerprint and the template kwargs, so that a later
preparation renders the entries it chose without transformers (``store``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

_Part = str | int
"""A piece of a rendered text: literal template output, or the index of a message."""


class _Ref(NamedTuple):
    """A content-derived argument of a logged operation, rebuilt from its parts on replay."""

    parts: tuple[_Part, ...]


class _Check(NamedTuple):
    """One question the template asked of content, and the answer it got."""

    parts: tuple[_Part, ...]
    op: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    result: Any


_REFLECTED: dict[str, Callable[..., Any]] = {
    "__rmod__": lambda s, other: other % s,
    "__rmul__": lambda s, other: other * s,
    "__bool__": lambda s: len(s) > 0,
}
_LOGGED_DUNDERS = [
    "__contains__",
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__hash__",
    "__len__",
    "__bool__",
    "__getitem__",
    "__iter__",
    "__mod__",
    "__rmod__",
    "__mul__",
    "__rmul__",
    "__format__",
]


def _op(name: str) -> Callable[..., Any]:
    return _REFLECTED.get(name) or getattr(str, name)


def _assemble(parts: tuple[_Part, ...], contents: Sequence[str]) -> str:
    return "".join(contents[p] if isinstance(p, int) else p for p in parts)


class _Probe(str):
    """A message's content while a template renders once for a message shape.

    Concatenation (``+``) keeps track of which parts came from which message; every other
    operation on it (tests, comparisons, ``len``, methods, filters built on them) is
    logged with its answer. A real conversation may reuse the render when every logged
    question has the same answer for its contents: the template then took the same path,
    so its output is the same literals around the same contents.
    """

    _parts: tuple[_Part, ...]
    _log: list[_Check]

    @classmethod
    def make(cls, text: str, parts: tuple[_Part, ...], log: list[_Check]) -> _Probe:
        probe = cls(text)
        probe._parts = parts
        probe._log = log
        return probe

    def __str__(self) -> str:
        return self  # stays a probe through str(), which output and filters call

    def __add__(self, other: object) -> Any:
        if not isinstance(other, str):
            return NotImplemented
        return _Probe.make(str.__add__(self, other), self._parts + _parts_of(other), self._log)

    def __radd__(self, other: object) -> Any:
        if not isinstance(other, str):
            return NotImplemented
        return _Probe.make(str.__add__(other, self), _parts_of(other) + self._parts, self._log)

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_") or not callable(getattr(str, name, None)):
            return object.__getattribute__(self, name)
        return functools.partial(_Probe._logged, self, name)

    def _logged(self, op: str, *args: Any, **kwargs: Any) -> Any:
        plain = [str.__str__(a) if isinstance(a, _Probe) else a for a in args]
        result = _op(op)(str.__str__(self), *plain, **kwargs)
        refs = tuple(_Ref(a._parts) if isinstance(a, _Probe) else a for a in args)
        self._log.append(_Check(self._parts, op, refs, tuple(sorted(kwargs.items())), result))
        return result


def _parts_of(text: str) -> tuple[_Part, ...]:
    return text._parts if isinstance(text, _Probe) else (text,)


def _logging_dunder(name: str) -> Callable[..., Any]:
    def method(self: _Probe, *args: Any) -> Any:
        return self._logged(name, *args)

    return method


for _name in _LOGGED_DUNDERS:
    setattr(_Probe, _name, _logging_dunder(_name))


_MARK = "Zq7Vx"
"""In every probe; seen in a literal it means a probe came out altered (e.g. escaped)."""


def _sentinel(index: int) -> str:
    """Text no template writes, which any escaping, stripping or case change would alter."""
    return f"\x1e{index}\n \"<&>'\\{_MARK}é\x1f"


_SENTINEL = re.compile(re.escape("\x1e") + r"(\d+)" + re.escape(_sentinel(0)[2:]))


@dataclass(frozen=True)
class _Plan:
    """The template's output for one message shape: literals and content indices, valid
    for contents that answer every check as the probes did."""

    pieces: tuple[_Part, ...]
    checks: tuple[_Check, ...]

    def applies(self, contents: Sequence[str]) -> bool:
        return all(_holds(check, contents) for check in self.checks)

    def text(self, contents: Sequence[str]) -> str:
        return _assemble(self.pieces, contents)


def _holds(check: _Check, contents: Sequence[str]) -> bool:
    args = [_assemble(a.parts, contents) if isinstance(a, _Ref) else a for a in check.args]
    try:
        answer = _op(check.op)(_assemble(check.parts, contents), *args, **dict(check.kwargs))
    except Exception:  # an operation that fails on the real text is simply not the same path
        return False
    return bool(type(answer) is type(check.result) and answer == check.result)


class Plans:
    """Chat-template renders without jinja: one probe render per message shape (the roles
    in order), then string assembly per conversation.

    A shape whose template output does not show every probe verbatim (escaped, cut,
    transformed) has no plan, and conversations of that shape are rendered for real. The
    first conversation each plan serves is rendered for real as well and compared; one
    difference turns plans off for good.
    """

    def __init__(self, template: Any | None, variables: dict[str, Any]) -> None:
        self._template = template
        self._variables = variables
        self._plans: dict[tuple[str, ...], _Plan | None] = {}
        self._verified: set[tuple[str, ...]] = set()
        self._off = False

    @classmethod
    def for_tokenizer(cls, tok: Any, kwargs: Mapping[str, Any]) -> Plans | None:
        try:  # the compiled template transformers itself renders with (a private helper)
            from transformers.utils.chat_template_utils import _compile_jinja_template

            template = _compile_jinja_template(tok.get_chat_template())
            variables = {**tok.special_tokens_map, **kwargs}
        except Exception:  # no template, or another transformers: always render for real
            return None
        return cls(template, variables)

    @classmethod
    def from_verified(cls, data: Any) -> Plans | None:
        """Plans that ``verified_plans`` wrote; they make no new plans (no template), so a
        shape they lack is rendered for real. None if ``data`` is not what it wrote."""
        plans = cls(None, {})
        try:
            for item in data:
                shape = tuple(str(role) for role in item["shape"])
                plans._plans[shape] = _Plan(
                    tuple(_parts(item["pieces"])), tuple(_decode_check(c) for c in item["checks"])
                )
                plans._verified.add(shape)
        except (KeyError, TypeError, ValueError):
            return None
        return plans

    def verified_plans(self) -> list[dict[str, Any]]:
        """Every plan checked against a real render, as JSON values (none once off; a plan
        whose checks hold values JSON cannot tag is left out)."""
        if self._off:
            return []
        out = []
        for shape in sorted(self._verified):
            plan = self._plans.get(shape)
            if plan is None:
                continue
            try:
                checks = [_encode_check(check) for check in plan.checks]
            except _Unencodable:
                continue
            out.append({"shape": list(shape), "pieces": list(plan.pieces), "checks": checks})
        return out

    def has_plan(self, messages: Sequence[Mapping[str, str]]) -> bool:
        """Whether ``text`` gives ``messages`` from a verified plan (no real render)."""
        shape = tuple(m["role"] for m in messages)
        return not self._off and shape in self._verified and self._plans.get(shape) is not None

    def verified_text(self, messages: Sequence[Mapping[str, str]]) -> str | None:
        """``messages`` rendered by a plan already checked against a real render, or None."""
        if not self.has_plan(messages):
            return None
        plan = self._plans[tuple(m["role"] for m in messages)]
        contents = [m["content"] for m in messages]
        return plan.text(contents) if plan is not None and plan.applies(contents) else None

    @property
    def off(self) -> bool:
        return self._off

    def text(self, messages: Sequence[Mapping[str, str]]) -> str | None:
        if self._off:
            return None
        shape = tuple(m["role"] for m in messages)
        if shape not in self._plans:
            if self._template is None:
                return None  # kept plans only: no new ones
            self._plans[shape] = self._plan(shape)
        plan = self._plans[shape]
        contents = [m["content"] for m in messages]
        return plan.text(contents) if plan is not None and plan.applies(contents) else None

    def unverified(self, messages: Sequence[Mapping[str, str]]) -> bool:
        return tuple(m["role"] for m in messages) not in self._verified

    def verified(self, messages: Sequence[Mapping[str, str]], same: bool) -> None:
        self._verified.add(tuple(m["role"] for m in messages))
        self._off = self._off or not same

    def _plan(self, shape: tuple[str, ...]) -> _Plan | None:
        if self._template is None:
            return None
        log: list[_Check] = []
        probes = [_Probe.make(_sentinel(i), (i,), log) for i in range(len(shape))]
        messages = [{"role": r, "content": p} for r, p in zip(shape, probes, strict=True)]
        try:
            out = self._template.render(
                messages=messages,
                tools=None,
                documents=None,
                add_generation_prompt=True,
                **self._variables,
            )
        except Exception:  # e.g. raise_exception for this shape: real renders will say why
            return None
        pieces: list[_Part] = []
        for i, chunk in enumerate(_SENTINEL.split(str.__str__(out))):
            pieces.append(int(chunk) if i % 2 else chunk)
        literals = [p for p in pieces if isinstance(p, str)]
        if any("\x1e" in p or "\x1f" in p or _MARK.lower() in p.lower() for p in literals):
            return None  # a probe came out altered
        return _Plan(tuple(p for p in pieces if p != ""), tuple(log))


class _Unencodable(Exception):
    """A logged value that tagged JSON does not hold (the plan is then not kept)."""


def _parts(values: Any) -> list[_Part]:
    parts = list(values)
    if not all(type(p) in (str, int) for p in parts):
        raise ValueError("plan parts are literals and message indices")
    return parts


def _encode_check(check: _Check) -> list[Any]:
    kwargs = [[name, _encode(value)] for name, value in check.kwargs]
    args = [_encode(a) for a in check.args]
    return [list(check.parts), check.op, args, kwargs, _encode(check.result)]


def _decode_check(data: Any) -> _Check:
    parts, op, args, kwargs, result = data
    public = isinstance(op, str) and not op.startswith("_") and callable(getattr(str, op, None))
    if not (public or op in _LOGGED_DUNDERS):
        raise ValueError(f"not an operation a probe logs: {op!r}")
    return _Check(
        tuple(_parts(parts)),
        op,
        tuple(_decode(a) for a in args),
        tuple((str(name), _decode(value)) for name, value in kwargs),
        _decode(result),
    )


def _encode(value: Any) -> Any:
    """Tagged JSON: scalars as themselves, containers as one-key objects (the type matters:
    a check compares the answer's type too)."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, _Ref):
        return {"ref": list(value.parts)}
    if type(value) in (list, tuple):
        return {type(value).__name__: [_encode(v) for v in value]}
    if type(value) is slice:
        return {"slice": [_encode(value.start), _encode(value.stop), _encode(value.step)]}
    raise _Unencodable(type(value).__name__)


def _decode(data: Any) -> Any:
    if not isinstance(data, dict):
        if data is None or type(data) in (bool, int, float, str):
            return data
        raise ValueError(f"not a tagged value: {data!r}")
    ((tag, inner),) = data.items()
    decoders: dict[str, Callable[[Any], Any]] = {
        "ref": lambda v: _Ref(tuple(_parts(v))),
        "list": lambda v: [_decode(x) for x in v],
        "tuple": lambda v: tuple(_decode(x) for x in v),
        "slice": lambda v: slice(*(_decode(x) for x in v)),
    }
    if tag not in decoders:
        raise ValueError(f"unknown tag {tag!r}")
    return decoders[tag](inner)

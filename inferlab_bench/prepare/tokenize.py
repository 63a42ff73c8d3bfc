"""The only transformers use: load the model's tokenizer, render chat templates, count tokens."""

from __future__ import annotations

import functools
import hashlib
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from inferlab_bench.errors import TokenizerError
from inferlab_bench.versions import package_version

_FINGERPRINT_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
)
_UNICODE_FORMS = {"NFC", "NFKC", "NFD", "NFKD"}
_MAX_UTF8_GROWTH = 12
"""Normalized UTF-8 bytes per input character, at most (4 bytes times NFC's 3x growth cap).
Segments too short to beat the room even so are not measured: skipping only ever gives a
weaker bound (0), never a wrong one, so the K forms' larger growth costs nothing but a
missed shortcut."""


class ChatTokenizer:
    """A model tokenizer as preparation uses it: exact chat-template token counts, plus a
    cheap, provable lower bound where the tokenizer's structure allows one."""

    _tok: Any
    _backend: Any
    _splitter: re.Pattern[str] | None
    _bound: _ByteBound | None
    _encode: Any
    _plans: _Plans | None

    def __init__(self, locator: str, template_kwargs: Mapping[str, Any] | None = None) -> None:
        """Starts loading on a background thread, so that loading overlaps whatever the
        caller does next (reading the dataset); the first use waits for it, and a load
        failure is raised there."""
        self.locator = locator
        self.template_kwargs = dict(template_kwargs or {})
        self._loading: _Background | None = _Background(lambda: _load(locator))

    def ready(self) -> None:
        """Wait for the load. Call before forking, so that children inherit a loaded
        tokenizer and no thread in the middle of an import."""
        if self._loading is None:
            return
        loading, self._loading = self._loading, None
        self._tok = loading.result()
        self._backend = getattr(self._tok, "backend_tokenizer", None)
        added = _plain_added_tokens(self._tok, self._backend)
        self._splitter = None if added is None else _splitter(added)
        self._bound = None if added is None else _ByteBound.for_backend(self._backend, added)
        self._encode = _batch_encoder(self._backend)
        self._plans = _Plans.for_tokenizer(self._tok, self.template_kwargs)

    def render(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The chat template applied to ``messages``, as ``apply_chat_template`` gives it.

        Most renders come from a plan made once per message shape (see ``_Plans``); the
        first use of each plan is checked against a real render.
        """
        self.ready()
        if self._plans is None:
            return self._render(messages)
        text = self._plans.text(messages)
        if text is None:
            return self._render(messages)
        if self._plans.unverified(messages):
            real = self._render(messages)
            self._plans.verified(messages, real == text)
            return real
        return text

    def _render(self, messages: Sequence[Mapping[str, str]]) -> str:
        try:
            text = self._tok.apply_chat_template(
                list(messages), add_generation_prompt=True, tokenize=False, **self.template_kwargs
            )
        except Exception as exc:  # jinja errors, missing template: all one failure to the user
            raise TokenizerError(f"{self.locator}: chat template failed: {exc}") from exc
        return str(text)

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Exact token counts of already-rendered texts (no special tokens added), batched."""
        self.ready()
        if not texts:
            return []
        if self._encode is not None:
            return [len(encoding) for encoding in self._encode(list(texts), False)]
        return [len(self._tok(t, add_special_tokens=False)["input_ids"]) for t in texts]

    def lower_bound(self, segment: str, room: int) -> int:
        """A number never above the segment's count; 0 when no bound is provable or when
        the bound could not exceed ``room`` anyway (then it is not worth computing)."""
        self.ready()
        if self._bound is None:
            return 0
        return self._bound.of(segment, room)

    def split_segments(self, text: str) -> tuple[list[str], int] | None:
        """Cut ``text`` at added tokens the way the tokenizer does: (segments, #added tokens).

        Then count(text) = #added tokens + sum(count(segment)) exactly: the tokenizer cuts
        added tokens out before normalizing, pre-tokenizing and modelling each piece alone,
        so nothing merges across a cut. None when this tokenizer's added tokens are matched
        in ways we do not mirror (normalized, stripping, single-word), or it truncates or
        pads, or there is no fast backend.
        """
        self.ready()
        if self._splitter is None:
            return None
        pieces = self._splitter.split(text)
        return [p for p in pieces if p], len(pieces) - 1


class _Background:
    """One call on a daemon thread; ``result`` waits for it and re-raises its error."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self._value = call()
        except BaseException as exc:  # handed to whoever waits for the result
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def fingerprint(locator: str) -> str:
    """sha256 over the tokenizer's files (they hold the chat template) and library versions.

    Read from the files alone, so a warm preparation never loads the tokenizer.
    """
    directory = Path(locator)
    if not directory.is_dir():
        raise TokenizerError(
            f"model.locator {locator!r}: not a local tokenizer directory",
            hint="point model.locator at a directory with tokenizer.json / tokenizer_config.json",
        )
    digest = hashlib.sha256()
    for name in _FINGERPRINT_FILES:
        path = directory / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    for package in ("transformers", "tokenizers"):
        digest.update(f"{package}={package_version(package)}".encode())
    return digest.hexdigest()


def _load(locator: str) -> Any:
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(locator, local_files_only=True)
    except Exception as exc:  # transformers raises OSError, ValueError, ... for a bad locator
        raise TokenizerError(
            f"model.locator {locator!r}: cannot load a tokenizer from local files ({exc})",
            hint="point model.locator at a directory with tokenizer.json / tokenizer_config.json",
        ) from exc


def _batch_encoder(backend: Any) -> Any:
    """The backend's fastest batch encode: ``encode_batch_fast`` skips offset tracking,
    which we never read (tokenizers >= 0.21); the ids, and so the counts, are the same."""
    if backend is None:
        return None
    return getattr(backend, "encode_batch_fast", None) or backend.encode_batch


def _plain_added_tokens(tok: Any, backend: Any) -> list[str] | None:
    """The added tokens' contents when the backend cuts them out verbatim before anything
    else, so that splitting on them ourselves is exact; None otherwise.

    Verbatim means: not normalized, no lstrip/rstrip/single-word matching, special tokens
    not encoded as text, and no truncation or padding that would make a whole text count
    differently from the sum of its pieces.
    """
    if backend is None or backend.truncation is not None or backend.padding is not None:
        return None
    if getattr(backend, "encode_special_tokens", False):
        return None
    added = list(getattr(tok, "added_tokens_decoder", {}).values())
    if any(a.normalized or a.lstrip or a.rstrip or a.single_word for a in added):
        return None
    return [a.content for a in added]


def _splitter(contents: list[str]) -> re.Pattern[str]:
    """Leftmost-longest over the added tokens, as the backend matches them. With no added
    tokens, a pattern that cannot occur in text keeps every text one segment."""
    if not contents:
        return re.compile(r"(?!)")
    ordered = sorted(set(contents), key=len, reverse=True)
    return re.compile("|".join(map(re.escape, ordered)))


class _ByteBound:
    """tokens >= ceil(bytes / longest token) for a segment of byte-level BPE.

    With a ByteLevel pre-tokenizer every token covers a whole number of bytes of its
    segment and no token is unknown, so a segment of B normalized bytes needs at least
    B / L tokens, L being the longest vocabulary entry in bytes. Segments hold no added
    tokens (they were cut out first), and are normalized here exactly as the tokenizer does.
    """

    def __init__(self, longest: int, normalizer: Any) -> None:
        self._longest = longest
        self._normalizer = normalizer

    @classmethod
    def for_backend(cls, backend: Any, added: list[str]) -> _ByteBound | None:
        model = backend.model
        if type(model).__name__ != "BPE" or getattr(model, "dropout", None):
            return None
        if "ByteLevel" not in repr(backend.pre_tokenizer):
            return None
        normalizer = backend.normalizer
        if normalizer is not None and type(normalizer).__name__ not in _UNICODE_FORMS:
            return None
        longest = max([len(k) for k in backend.get_vocab()] + [len(s.encode()) for s in added])
        return cls(longest, normalizer)

    def of(self, segment: str, room: int) -> int:
        if len(segment) * _MAX_UTF8_GROWTH <= self._longest * room:
            return 0  # even the largest normalized size could not prove more than room
        if segment.isascii():
            size = len(segment)  # every Unicode normalization form leaves ASCII unchanged
        else:
            normalized = (
                segment if self._normalizer is None else self._normalizer.normalize_str(segment)
            )
            size = len(normalized.encode("utf-8"))
        return math.ceil(size / self._longest)


class PrefixCounter:
    """``CountUpTo`` for one conversation: counts by segments, stops once past the limit.

    count(text) = #added tokens + sum(count(segment)) (see ``split_segments``). Segments
    repeat across the candidate inputs of one conversation and are counted once; a segment
    whose byte bound already exceeds what is left of the limit is never tokenized. Unknown
    segments are encoded in one batch per step, as many as are likely to fit the room left
    (a guess from the tokens per character seen so far; it only decides the batch size,
    never a count), so a long tail past the limit is rarely tokenized.
    """

    def __init__(self, tokenizer: ChatTokenizer, rate: TokenRate | None = None) -> None:
        self._tok = tokenizer
        self._rate = rate or TokenRate()
        self._counts: dict[str, int] = {}

    def __call__(self, messages: list[dict[str, str]], limit: int) -> int:
        text = self._tok.render(messages)
        split = self._tok.split_segments(text)
        if split is None:
            return self._tok.count_texts([text])[0]
        segments, total = split
        for position, segment in enumerate(segments):
            if total > limit:
                return total
            count = self._counts.get(segment)
            if count is None:
                bound = self._tok.lower_bound(segment, limit - total)
                if bound > limit - total:
                    return total + bound  # provably too long: never tokenized
                self._fetch(segments, position, limit - total)
                count = self._counts[segment]
            total += count
        return total

    def _fetch(self, segments: list[str], start: int, room: int) -> None:
        """Count ``segments[start]`` and the unknown ones after it likely to fit in ``room``."""
        ratio = self._rate.per_char()
        batch: dict[str, None] = {}  # ordered and deduplicated
        expected = 0.0
        for segment in segments[start:]:
            if segment in self._counts or segment in batch:
                continue
            if batch and expected + len(segment) * ratio > room:
                break
            batch[segment] = None
            expected += len(segment) * ratio
        for segment, count in zip(batch, self._tok.count_texts(list(batch)), strict=True):
            self._counts[segment] = count
            self._rate.add(len(segment), count)


class TokenRate:
    """Tokens per character seen so far, shared by the counters of one worker: a guess of
    how much text fits the room left, used only to size encode batches."""

    def __init__(self) -> None:
        self._chars = 300  # a prior of 1 token per 3 characters, soon outweighed
        self._tokens = 100

    def per_char(self) -> float:
        return self._tokens / self._chars

    def add(self, chars: int, tokens: int) -> None:
        self._chars += chars
        self._tokens += tokens


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


class _Plans:
    """Chat-template renders without jinja: one probe render per message shape (the roles
    in order), then string assembly per conversation.

    A shape whose template output does not show every probe verbatim (escaped, cut,
    transformed) has no plan, and conversations of that shape are rendered for real. The
    first conversation each plan serves is rendered for real as well and compared; one
    difference turns plans off for good.
    """

    def __init__(self, template: Any, variables: dict[str, Any]) -> None:
        self._template = template
        self._variables = variables
        self._plans: dict[tuple[str, ...], _Plan | None] = {}
        self._verified: set[tuple[str, ...]] = set()
        self._off = False

    @classmethod
    def for_tokenizer(cls, tok: Any, kwargs: Mapping[str, Any]) -> _Plans | None:
        try:  # the compiled template transformers itself renders with (a private helper)
            from transformers.utils.chat_template_utils import _compile_jinja_template

            template = _compile_jinja_template(tok.get_chat_template())
            variables = {**tok.special_tokens_map, **kwargs}
        except Exception:  # no template, or another transformers: always render for real
            return None
        return cls(template, variables)

    def text(self, messages: Sequence[Mapping[str, str]]) -> str | None:
        if self._off:
            return None
        shape = tuple(m["role"] for m in messages)
        if shape not in self._plans:
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

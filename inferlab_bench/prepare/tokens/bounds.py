"""Bounds on a segment's token count, proved from the tokenizer's structure alone.

A segment is text between added tokens, which the tokenizer normalizes, pre-tokenizes and
models on its own. For byte-level BPE (no dropout, no unknown bytes) these bounds hold.

Upper bound, **bytes**: ByteLevel writes each byte of the normalized segment as one
character, and BPE starts from one symbol per character; every merge joins two adjacent
symbols into one, and nothing else changes the number of symbols. So a segment has at most
as many tokens as its normalized UTF-8 bytes, plus one when ByteLevel adds a prefix space
(``add_prefix_space``). A rendered input has at most #added tokens + the sum of this bound
over its segments (see ``ChatTokenizer.split_segments``), so an input under the limit by
this count fits without being encoded.

Lower bounds, for a segment that is not empty: at least **one** token (every symbol of a
non-empty word is a token, and Unicode normalization never empties a non-empty text) and:

- **bytes**: every token covers a whole number of the segment's normalized bytes, so
  there are at least ``bytes / L`` tokens, L being the longest vocabulary entry in bytes.
- **pre-tokens**: every pre-token gives at least one token. For the GPT-2, Llama 3 and
  Qwen2 split patterns (matched exactly, see ``PATTERNS``) no pre-token holds letters of
  two letter runs, or a letter and a digit. So a segment has at least as many tokens as it
  has runs of ASCII letters (joined through any non-ASCII character, which might be a
  letter) plus, for Qwen2, its ASCII digits (each its own pre-token) or, for the others,
  runs of ASCII digits. For English-like text this is about 3/4 of the true count
  (bytes: about 1/30).

The pre-tokenizer sees normalized text, but the pre-token bound is counted on the raw
text, which costs nothing to get: Unicode normalization never turns an ASCII letter or
digit into a non-letter or non-digit, and the only ASCII non-letters it can absorb into
another character are ``<``, ``=`` and ``>`` (composed with U+0338 into ≮ ≠ ≯, which are
not letters either). So a raw run holds at least one letter of the normalized text, and
two raw runs stay apart (``tests/prepare/test_bounds.py`` checks this against the Unicode
database). Everything else that changes maps non-ASCII to something, which only splits
runs further.

A bound decides "fits", "too long" or "at least two tokens" without encoding; it never
yields a count. A tokenizer that is not byte-level BPE as described gets no bounds at all
(``SegmentBound.for_backend`` returns None) and is counted exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from inferlab_bench.prepare.tokens.patterns import PATTERNS, byte_chars, pre_tokenizer_spec

_UNICODE_FORMS = {"NFC", "NFKC", "NFD", "NFKD"}
_MAX_UTF8_GROWTH = 12
"""Normalized UTF-8 bytes per input character, at most (4 bytes times NFC's 3x growth cap).
Segments too short to beat the room even so are not measured."""

_SPLITTING_STEPS = {"Split", "Digits"}
"""Pre-tokenizer steps that cut text into pieces without rewriting or dropping any of it
(a ``Removed`` split drops text: see ``_only_splits``)."""

_ASCII_LETTER = np.zeros(256, dtype=bool)
_ASCII_LETTER[np.r_[65:91, 97:123]] = True
_ASCII_DIGIT = np.zeros(256, dtype=bool)
_ASCII_DIGIT[48:58] = True
_JOINER = np.zeros(256, dtype=bool)  # UTF-8 bytes of non-ASCII characters: maybe letters
_JOINER[128:] = True


@dataclass(frozen=True)
class SegmentBound:
    """The larger of the byte bound and (where the pattern is known) the pre-token bound."""

    longest: int
    normalizer: Any
    digits: str | None  # "each", "runs", or None when the pre-token bound does not apply
    prefix_space: bool = False  # ByteLevel may add one space (one byte) per segment

    @classmethod
    def for_backend(cls, backend: Any, added: list[str]) -> SegmentBound | None:
        model = backend.model
        if type(model).__name__ != "BPE" or getattr(model, "dropout", None):
            return None
        digits = _digit_rule(backend)
        if digits is None:
            return None
        normalizer = backend.normalizer
        if normalizer is not None and type(normalizer).__name__ not in _UNICODE_FORMS:
            return None
        vocab = backend.get_vocab()
        if not all(char in vocab for char in byte_chars()):
            return None  # a byte with no token of its own could vanish: no bound holds
        longest = max([len(k) for k in vocab] + [len(s.encode()) for s in added])
        return cls(
            longest, normalizer, None if digits == "unknown" else digits, _prefix_space(backend)
        )

    def at_most(self, segment: str) -> int:
        """Never below the segment's count: its normalized bytes (+1 for a prefix space)."""
        return len(self._normalized(segment)) + int(self.prefix_space)

    def at_least(self, segment: str) -> int:
        """Never above the segment's count, however small (1 for any non-empty segment)."""
        if not segment:
            return 0
        return max(1, self.of(segment, 0))

    def of(self, segment: str, room: int) -> int:
        """Never above the segment's count; 0 when even the best case could not exceed
        ``room`` (then it is not worth computing)."""
        bound = 0
        if self.digits is not None and len(segment) > room:  # else at most one per character
            raw = np.frombuffer(segment.encode("utf-8"), dtype=np.uint8)
            bound = pre_token_bound(raw, self.digits)
        if bound <= room and len(segment) * _MAX_UTF8_GROWTH > self.longest * room:
            bound = max(bound, math.ceil(len(self._normalized(segment)) / self.longest))
        return bound

    def _normalized(self, segment: str) -> bytes:
        if segment.isascii() or self.normalizer is None:
            return segment.encode()  # every Unicode normalization form leaves ASCII unchanged
        return str(self.normalizer.normalize_str(segment)).encode("utf-8")


def pre_token_bound(data: npt.NDArray[np.uint8], digits: str) -> int:
    """Runs of ASCII letters (joined through joiners), plus ASCII digits one each
    (``digits="each"``) or their runs, joined the same way (``"runs"``)."""
    joiner = _JOINER[data]
    letters = _runs_containing(_ASCII_LETTER[data], joiner)
    if digits == "each":
        return letters + int(np.count_nonzero(_ASCII_DIGIT[data]))
    return letters + _runs_containing(_ASCII_DIGIT[data], joiner)


def _runs_containing(core: npt.NDArray[np.bool_], joiner: npt.NDArray[np.bool_]) -> int:
    """Maximal runs of ``core | joiner`` bytes that hold at least one ``core`` byte."""
    member = core | joiner
    if not member.any():
        return 0
    starts = np.empty(len(member), dtype=bool)
    starts[0] = member[0]
    np.greater(member[1:], member[:-1], out=starts[1:])
    run_of_core = np.cumsum(starts)[core]
    if run_of_core.size == 0:
        return 0
    return 1 + int(np.count_nonzero(np.diff(run_of_core)))


def _prefix_space(backend: Any) -> bool:
    """Whether any ByteLevel step of the pre-tokenizer adds a prefix space (unreadable
    specs count as yes: the upper bound then only gets one looser)."""
    spec = pre_tokenizer_spec(backend)
    if spec is None:
        return True
    steps = spec.get("pretokenizers") if spec.get("type") == "Sequence" else [spec]
    return any(step.get("add_prefix_space", False) for step in steps or [])


def _only_splits(step: dict[str, Any]) -> bool:
    return step.get("type") in _SPLITTING_STEPS and step.get("behavior") != "Removed"


def _digit_rule(backend: Any) -> str | None:
    """ "each"/"runs" for a pre-tokenizer whose splitting we know; "unknown" for other
    byte-level ones that only split text before writing its bytes; None for anything else
    (a step that may rewrite text, such as Metaspace, voids every bound here)."""
    spec = pre_tokenizer_spec(backend)
    if spec is None:
        return None
    if spec.get("type") == "ByteLevel":
        return "runs" if spec.get("use_regex") else "unknown"
    steps = spec.get("pretokenizers") if spec.get("type") == "Sequence" else None
    if not steps or steps[-1].get("type") != "ByteLevel":
        return None
    if any(not _only_splits(step) for step in steps[:-1]):
        return None
    if len(steps) != 2:
        return "unknown"
    split, level = steps
    known = (
        split.get("type") == "Split"
        and split.get("behavior") == "Isolated"
        and not split.get("invert")
        and not level.get("use_regex")
    )
    pattern = str((split.get("pattern") or {}).get("Regex"))
    return PATTERNS.get(pattern, "unknown") if known else "unknown"

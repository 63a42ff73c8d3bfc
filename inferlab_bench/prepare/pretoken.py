"""Exact token counts of plain-ASCII segments, by word, for the split patterns we have read.

A fast tokenizer encodes a segment (text between added tokens) as: normalize, split into
pre-tokens with its regex, write each pre-token's bytes as ByteLevel characters, and run
the BPE model on each pre-token alone. Its regex engine (Oniguruma) is what makes encoding
slow: most of ``encode_batch`` is spent splitting. This module does the same steps with the
tokenizer's own BPE model, and splits with Python's ``regex`` (about 4x faster), so the
count is the sum of the model's token counts over pre-tokens, each distinct word modelled
once.

Exact, not estimated, on the text it accepts:

- the backend is normalizer (none or a Unicode form) -> ``Split(pattern, Isolated)`` ->
  ``ByteLevel`` without prefix space or regex -> BPE without dropout, and the pattern is
  one of the Qwen2 / Llama 3 patterns in ``bounds`` (read to the character);
- the segment is ASCII, and none of its characters is one the two regex engines classify
  differently: on ASCII, ``\\p{L}`` is ``[A-Za-z]`` and ``\\p{N}`` is ``[0-9]`` in both; the
  case-insensitive contractions only meet ASCII letters (so no Unicode case folding, e.g.
  U+017F, is involved); ``\\s`` is ``[\\t\\n\\v\\f\\r ]`` in both (U+001C-U+001F, which
  ``str.isspace`` and ``re`` count as space, are refused all the same: a margin that costs
  nothing on real text); every other ASCII character is neither letter, digit nor space in
  either. Both engines then find the same leftmost-first, greedy matches of the same
  pattern. Every Unicode normalization leaves ASCII as it is.

Anything else returns None and is encoded by the tokenizer itself. As a guard against an
argument gone wrong, each process also encodes its first ``CHECKED`` accepted segments
and turns this path off for good at the first difference (``ChatTokenizer``).
"""

from __future__ import annotations

from typing import Any

import regex

from inferlab_bench.prepare.bounds import PATTERNS, byte_chars, pre_tokenizer_spec

CHECKED = 256
_UNICODE_FORMS = {"NFC", "NFKC", "NFD", "NFKD"}
_REFUSED = regex.compile(r"[\x1c-\x1f]")
_BYTE_CHARS = "".join(byte_chars())


class AsciiCounter:
    """``count(segment)``: the exact token count of an accepted segment, else None."""

    def __init__(self, model: Any, pattern: str) -> None:
        self._split = regex.compile(pattern).findall
        self._words = _WordCounts(model.tokenize)

    @classmethod
    def for_backend(cls, backend: Any) -> AsciiCounter | None:
        model, normalizer = backend.model, backend.normalizer
        if type(model).__name__ != "BPE" or getattr(model, "dropout", None):
            return None
        if normalizer is not None and type(normalizer).__name__ not in _UNICODE_FORMS:
            return None
        pattern = _split_pattern(pre_tokenizer_spec(backend) or {})
        return None if pattern is None else cls(model, pattern)

    def count(self, segment: str) -> int | None:
        if not segment.isascii() or _REFUSED.search(segment):
            return None
        # No gaps to mirror: every ASCII character can start a match (letters, digits,
        # whitespace and ``[^\\s\\p{L}\\p{N}]`` each have an alternative), so findall skips
        # none (tests/prepare/test_pretoken.py checks the pieces join back to the text).
        return sum(map(self._words.__getitem__, self._split(segment)))


class _WordCounts(dict[str, int]):
    """Word -> its BPE token count, modelled on first sight (lookups stay in C)."""

    def __init__(self, tokenize: Any) -> None:
        super().__init__()
        self._tokenize = tokenize

    def __missing__(self, word: str) -> int:
        mapped = "".join([_BYTE_CHARS[b] for b in word.encode("ascii")])
        count = self[word] = len(self._tokenize(mapped))
        return count


def _split_pattern(spec: dict[str, Any]) -> str | None:
    """The Split regex of ``Sequence[Split(Isolated), ByteLevel]`` when it is a pattern we
    have read and every pre-tokenizer detail matches what this module mirrors."""
    steps = spec.get("pretokenizers") if spec.get("type") == "Sequence" else None
    if not steps or len(steps) != 2:
        return None
    split, level = steps
    pattern = str((split.get("pattern") or {}).get("Regex"))
    mirrored = (
        split.get("type") == "Split"
        and split.get("behavior") == "Isolated"
        and not split.get("invert")
        and level.get("type") == "ByteLevel"
        and not level.get("use_regex")
        and not level.get("add_prefix_space")
        and pattern in PATTERNS
    )
    return pattern if mirrored else None

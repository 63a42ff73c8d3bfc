"""Exact token counts of segments, by word, for the split patterns we have read.

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
  one of the Qwen2 / Llama 3 patterns in ``patterns`` (read to the character);
- the segment is ASCII, and none of its characters is one the two regex engines classify
  differently: on ASCII, ``\\p{L}`` is ``[A-Za-z]`` and ``\\p{N}`` is ``[0-9]`` in both; the
  case-insensitive contractions only meet ASCII letters (so no Unicode case folding, e.g.
  U+017F, is involved); ``\\s`` is ``[\\t\\n\\v\\f\\r ]`` in both (U+001C-U+001F, which
  ``str.isspace`` and ``re`` count as space, are refused all the same: a margin that costs
  nothing on real text); every other ASCII character is neither letter, digit nor space in
  either. Both engines then find the same leftmost-first, greedy matches of the same
  pattern. Every Unicode normalization leaves ASCII as it is. For the same reasons an
  ASCII segment is split with the standard library's ``re`` (about 1.7x faster than
  ``regex``) under ``re.ASCII``, with each ``\p{L}`` written ``A-Za-z`` and each ``\p{N}``
  ``0-9`` (``ascii_pattern``): on ASCII text these are the same classes, ``\s`` is the same
  set, and the contractions' case-insensitive match only meets ASCII letters;
- or its other characters were each probed (``_PROBES``) and pass: the pattern asks of a
  character only whether it is a letter, a number, a space, one of ``\\r\\n``, or
  case-folds to a contraction letter, and each probe's pieces depend on those answers, so
  pieces equal to the backend's own pre-tokenizer's in every probe mean both engines give
  the character the same answers (they may not for characters Unicode added or changed
  lately). It must also pass the tokenizer's normalizer unchanged and compose with nothing
  (no mark, no conjoining jamo, combining class 0), so the whole segment is normalized as is.

Anything else returns None and is encoded by the tokenizer itself. As a guard against an
argument gone wrong, each process also encodes its first ``CHECKED`` characters so counted
and turns this path off for good at the first difference (``ChatTokenizer``).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import regex

from inferlab_bench.prepare.tokens.patterns import PATTERNS, byte_chars, pre_tokenizer_spec

CHECKED = 200_000
_UNICODE_FORMS = {"NFC", "NFKC", "NFD", "NFKD"}
_REFUSED = regex.compile(r"[\x1c-\x1f]")
_BYTE_CHARS = "".join(byte_chars())
_NON_ASCII = regex.compile(r"[^\x00-\x7f]")
_PROBES = ("aC", "Ca", "CCa", "!C", "C!", "CCCC", "x'Cy", "1C", "C1", " C\n", "C\n\n", "a C b")
"""Texts in which a character's class for the split pattern (letter, number, space, other,
or a case-folded contraction letter) decides the pieces; ``C`` stands for the character."""
RULES_IDENTITY = hashlib.sha256(
    repr((_PROBES, sorted(PATTERNS), _REFUSED.pattern, sorted(_UNICODE_FORMS))).encode()
).hexdigest()[:16]
"""What a kept character verdict depends on besides the backend (``store``)."""


class WordCounter:
    """``count(segment)``: the exact token count of an accepted segment, else None."""

    def __init__(self, model: Any, pattern: str, backend: Any = None) -> None:
        self._split = regex.compile(pattern).findall
        self._split_ascii = re.compile(ascii_pattern(pattern), re.ASCII).findall
        self._words = _WordCounts(model.tokenize)
        self._backend = backend
        self._chars: dict[str, bool] = {}  # non-ASCII character -> probed and mirrored
        self._remembered: set[str] = set()  # characters whose verdict came from ``remember``

    @classmethod
    def for_backend(cls, backend: Any) -> WordCounter | None:
        model, normalizer = backend.model, backend.normalizer
        if type(model).__name__ != "BPE" or getattr(model, "dropout", None):
            return None
        if normalizer is not None and type(normalizer).__name__ not in _UNICODE_FORMS:
            return None
        pattern = _split_pattern(pre_tokenizer_spec(backend) or {})
        return None if pattern is None else cls(model, pattern, backend)

    def remember(self, memory: WordMemory) -> None:
        """Take word counts and character verdicts this backend gave before (``store``
        keeps them per tokenizer fingerprint): each is what this counter would compute
        itself, a function of the backend and the word or character alone."""
        self._words.remember(memory.words)
        self._chars.update(memory.chars)
        self._remembered.update(memory.chars)

    def absorb(self, memory: WordMemory) -> None:
        """Take what another process of this run learned (``learned``) as learned here."""
        for word, count in memory.words.items():
            if word not in self._words:
                self._words[word] = self._words.fresh[word] = count
        for char, ok in memory.chars.items():
            self._chars.setdefault(char, ok)

    def learned(self) -> WordMemory:
        """The word counts and character verdicts computed here since ``remember``."""
        chars = {c: ok for c, ok in self._chars.items() if c not in self._remembered}
        return WordMemory(dict(self._words.fresh), chars)

    def forget_learned(self) -> None:
        """Count everything computed so far as remembered (``learned`` starts afresh)."""
        self._words.fresh.clear()
        self._remembered.update(self._chars)

    def memory(self) -> WordMemory:
        """Everything remembered and learned (what the next run may ``remember``)."""
        return WordMemory(dict(self._words), dict(self._chars))

    def count(self, segment: str) -> int | None:
        if _REFUSED.search(segment):
            return None
        if segment.isascii():
            split = self._split_ascii
        elif self._all_mirrored(segment):
            split = self._split
        else:
            return None
        # No gaps to mirror: every character we accept can start a match (letters, digits,
        # whitespace and ``[^\\s\\p{L}\\p{N}]`` each have an alternative), so findall skips
        # none (tests/prepare/test_pretoken.py checks the pieces join back to the text).
        return sum(map(self._words.__getitem__, split(segment)))

    def learn_characters(self, texts: list[str]) -> None:
        """Probe every non-ASCII character of ``texts`` now (before forking, so that the
        workers share the verdicts instead of each probing the same characters)."""
        found: set[str] = set()
        for text in texts:
            if not text.isascii():
                found.update(_NON_ASCII.findall(text))
        for char in found.difference(self._chars):
            self._chars[char] = self._mirrored(char)

    def _all_mirrored(self, segment: str) -> bool:
        chars = self._chars
        for char in set(_NON_ASCII.findall(segment)):
            known = chars.get(char)
            if known is None:
                known = chars[char] = self._mirrored(char)
            if not known:
                return False
        return True

    def _mirrored(self, char: str) -> bool:
        """Whether ``char`` may be counted here (see the module docstring: it passes the
        normalizer unchanged, composes with nothing, and every probe splits alike)."""
        if self._backend is None or not _composes_with_nothing(char):
            return False
        normalizer = self._backend.normalizer
        if normalizer is not None and normalizer.normalize_str(char) != char:
            return False
        pre_tokenize = self._backend.pre_tokenizer.pre_tokenize_str
        for probe in _PROBES:
            text = probe.replace("C", char)
            theirs = [piece for piece, _ in pre_tokenize(text)]
            if theirs != [_byte_level(piece) for piece in self._split(text)]:
                return False
        return True


def ascii_pattern(pattern: str) -> str:
    """``pattern`` for ASCII text under ``re.ASCII``: ``\\p{L}`` becomes ``A-Za-z`` and
    ``\\p{N}`` ``0-9``, inside a character class as they stand, outside it bracketed."""
    out, in_class, k = [], False, 0
    while k < len(pattern):
        piece = pattern[k : k + 5]
        if piece in (r"\p{L}", r"\p{N}"):
            letters = "A-Za-z" if piece == r"\p{L}" else "0-9"
            out.append(letters if in_class else f"[{letters}]")
            k += 5
            continue
        char = pattern[k]
        if char == "\\":
            out.append(pattern[k : k + 2])
            k += 2
            continue
        in_class = (in_class and char != "]") or (not in_class and char == "[")
        out.append(char)
        k += 1
    return "".join(out)


def _composes_with_nothing(char: str) -> bool:
    """Not a mark, not a conjoining Hangul jamo, canonical combining class 0, and not a
    surrogate: no Unicode normalization joins it to a neighbour or reorders it."""
    code = ord(char)
    jamo = 0x1100 <= code <= 0x11FF or 0xA960 <= code <= 0xA97F or 0xD7B0 <= code <= 0xD7FF
    category = unicodedata.category(char)
    return not (jamo or category[0] == "M" or category == "Cs" or unicodedata.combining(char))


def _byte_level(piece: str) -> str:
    return "".join([_BYTE_CHARS[b] for b in piece.encode("utf-8")])


@dataclass(frozen=True)
class WordMemory:
    """Word -> BPE token count, and non-ASCII character -> mirrored (``WordCounter``)."""

    words: dict[str, int]
    chars: dict[str, bool]


class _WordCounts(dict[str, int]):
    """Word -> its BPE token count, modelled on first sight (lookups stay in C); the words
    modelled here (not remembered) are also in ``fresh``."""

    def __init__(self, tokenize: Any) -> None:
        super().__init__()
        self._tokenize = tokenize
        self.fresh: dict[str, int] = {}

    def remember(self, words: dict[str, int]) -> None:
        for word in self.fresh.keys() & words.keys():
            del self.fresh[word]  # both are the model's count of the word; no longer new
        self.update(words)

    def __missing__(self, word: str) -> int:
        count = self[word] = self.fresh[word] = len(self._tokenize(_byte_level(word)))
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

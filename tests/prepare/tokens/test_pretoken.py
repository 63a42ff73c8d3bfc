"""Counting plain-ASCII segments by word equals the tokenizer's own encode, or is refused."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
import regex

from inferlab_bench.prepare.tokens.patterns import PATTERNS
from inferlab_bench.prepare.tokens.pretoken import WordCounter, ascii_pattern
from inferlab_bench.prepare.tokens.tokenize import ChatTokenizer
from tests.prepare.conftest import QWEN_DIR, REAL_SAMPLE

ASCII_PIECES = [
    "word",
    "Words",
    "don't",
    "IT'S",
    "'re",
    "'LL",
    "'Ve",
    "'d",
    "'m",
    "''s",
    "x'S'",
    "42",
    "31415926535",
    "2024-12-04",
    "3.14",
    "  ",
    "\t",
    "\n",
    "\r\n",
    " \n ",
    "\n\n\n",
    "   x",
    "\v",
    "\f",
    ",",
    "...",
    "--",
    "C++",
    "snake_case",
    "a_b",
    "<|im_end",
    "<s>",
    "$$",
    "#!/bin",
    "{'a': [1, 2]}",
    "x=1;",
    "   \t  \n",
    "\x7f",
    "\x00",
    "\x08",
]


def _ascii_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(rng.choice(ASCII_PIECES) + rng.choice(["", " ", "  ", "\n"]) for _ in range(60))
        for _ in range(count)
    ]


@pytest.fixture(params=["qwen2", "llama3"])
def tok(request: pytest.FixtureRequest) -> ChatTokenizer:
    if request.param == "qwen2":
        return ChatTokenizer(QWEN_DIR)
    return ChatTokenizer(str(request.getfixturevalue("llama3_tokenizer")))


def test_word_counts_equal_encode_on_real_and_adversarial_ascii(tok: ChatTokenizer) -> None:
    tok.ready()
    counter: Any = tok._by_word  # noqa: SLF001 (the path under test)
    assert counter is not None
    records = json.loads(REAL_SAMPLE.read_text())
    texts = [t["value"] for r in records for t in r["conversations"]] + _ascii_texts(5, 500)
    texts += ASCII_PIECES
    segments = [s for text in texts for s in (tok.split_segments(text) or ([], 0))[0]]
    real = tok._encode_counts(segments)  # noqa: SLF001
    accepted = 0
    for segment, count in zip(segments, real, strict=True):
        fast = counter.count(segment)
        if fast is not None:
            accepted += 1
            assert fast == count, segment[:80]
            assert "".join(counter._split(segment)) == segment  # noqa: SLF001 (no gaps)
    assert accepted > 0.8 * len(segments)


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_ascii_text_splits_alike_with_re_and_regex(pattern: str) -> None:
    """``re`` with the ASCII spelling of the pattern finds the very pieces ``regex`` finds
    with the pattern itself, on real text and on random strings of every ASCII character
    the counter accepts."""
    ours = re.compile(ascii_pattern(pattern), re.ASCII).findall
    theirs = regex.compile(pattern).findall
    records = json.loads(REAL_SAMPLE.read_text())
    texts = [t["value"] for r in records for t in r["conversations"]] + _ascii_texts(7, 300)
    alphabet = [chr(c) for c in range(128) if not 0x1C <= c <= 0x1F]
    rng = random.Random(11)
    texts += ["".join(rng.choices(alphabet, k=rng.randint(1, 40))) for _ in range(20_000)]
    tricky = "aZ9 '\t\n\r\x0b\x0c.sStTlLdDmMvVeE"  # contractions, every kind of space
    texts += ["".join(rng.choices(tricky, k=30)) for _ in range(20_000)]
    ascii_texts = [t for t in texts if t.isascii()]
    assert len(ascii_texts) > 40_000
    for text in ascii_texts:
        assert ours(text) == theirs(text), repr(text[:80])


def test_text_the_engines_might_split_or_normalize_differently_is_refused() -> None:
    tok = ChatTokenizer(QWEN_DIR)
    tok.ready()
    counter: Any = tok._by_word  # noqa: SLF001
    for text in ["a\x1cb", "x\x1fy", "cafe\u0301", "\u1100\u1161", "a\u0338"]:
        assert counter.count(text) is None, text
    assert counter.count("caf\u00e9 \u2019quoted\u201d \u2022 \u6570\u636e") is not None


def test_non_ascii_accepted_by_probes_counts_exactly(tok: ChatTokenizer) -> None:
    from tests.prepare.test_equivalence_real import ADVERSARIAL

    tok.ready()
    counter: Any = tok._by_word  # noqa: SLF001
    texts = ADVERSARIAL + [a * 7 for a in ADVERSARIAL] + ["\u017f'\u017f x'\u017f \u212a'S"]
    texts += ["".join(chr(c) for c in range(start, start + 400)) for start in (0xA0, 0x370, 0x2000)]
    segments = [s for text in texts for s in (tok.split_segments(text) or ([], 0))[0]]
    for segment, count in zip(segments, tok._encode_counts(segments), strict=True):  # noqa: SLF001
        fast = counter.count(segment)
        assert fast is None or fast == count, segment[:80]


def test_only_mirrored_pre_tokenizers_get_the_word_counter(
    gpt2_tokenizer: str, word_tokenizer: str
) -> None:
    for locator in (gpt2_tokenizer, word_tokenizer):
        tok = ChatTokenizer(locator)
        tok.ready()
        assert WordCounter.for_backend(tok._backend) is None  # noqa: SLF001


def test_a_difference_turns_the_word_counter_off(monkeypatch: pytest.MonkeyPatch) -> None:
    tok = ChatTokenizer(QWEN_DIR)
    tok.ready()
    wrong: Any = tok._by_word  # noqa: SLF001
    monkeypatch.setattr(wrong, "count", lambda segment: 1)
    texts = ["several words of plain text", "and more"]
    assert tok.count_texts(texts) == tok._encode_counts(texts)  # noqa: SLF001
    assert tok._by_word is None  # noqa: SLF001

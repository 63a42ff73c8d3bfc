"""Lower bounds never exceed the true count, and they spare the tokenizer real work."""

from __future__ import annotations

import json
import random
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from inferlab_bench.prepare.tokens.bounds import SegmentBound
from inferlab_bench.prepare.tokens.tokenize import ChatTokenizer, PrefixCounter
from tests.prepare.conftest import QWEN_DIR

PIECES = [
    "word",
    "Words",
    "x",
    "don't",
    "IT'S",
    "'re",
    "42",
    "3.14159",
    "2024-12-04",
    "١٢٣",
    "é",
    "e\u0301",
    "<\u0338",
    "=\u0338",
    ">\u0338",
    "a<\u0338b",
    "ﬁ",
    "½",
    "⑴",
    "Ｆｕｌｌ",
    "\u212a",
    "数据",
    "こんにちは",
    "ёлка",
    "🙂",
    "\n",
    "\n\n",
    "   ",
    "\t",
    ",",
    "...",
    "--",
    "//" + "-" * 60,
    " " * 130,
    "<|im_end|",
    "&amp;",
    "C++",
    "snake_case",
    "x²",
    "a\u0338b",
]


@pytest.fixture(scope="module")
def qwen() -> ChatTokenizer:
    tok = ChatTokenizer(QWEN_DIR)
    tok.ready()
    return tok


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(
            rng.choice(PIECES) + rng.choice(["", " ", "", "\n"])
            for _ in range(rng.randrange(1, 80))
        )
        for _ in range(count)
    ]


def test_the_unicode_facts_the_raw_text_bound_rests_on() -> None:
    # The bound is counted before normalization. It holds because no normalization turns
    # an ASCII letter or digit into a non-letter / non-digit, and the only ASCII
    # non-letters that can be absorbed into another character (canonical composition with
    # a following mark) are < = >, into characters that are not letters or digits.
    absorbing = {}
    for code in range(0x80, 0x110000):
        decomposed = unicodedata.normalize("NFD", chr(code))
        if len(decomposed) > 1 and decomposed[0].isascii():
            absorbing[chr(code)] = decomposed[0]
    bases = {base for base in absorbing.values() if not base.isalpha()}
    assert bases == {"<", "=", ">"}
    for char, base in absorbing.items():  # a letter stays a letter; the rest are symbols
        composed = unicodedata.normalize("NFC", char)
        assert composed.isalpha() if base.isalpha() else not composed.isalnum(), hex(ord(char))
    for char in map(chr, range(128)):
        for form in ("NFC", "NFD", "NFKC", "NFKD"):
            assert unicodedata.normalize(form, char) == char


def test_bound_never_exceeds_the_count(qwen: ChatTokenizer) -> None:
    texts = _texts(1, 400) + PIECES
    counts = qwen.count_texts(texts)
    for text, count in zip(texts, counts, strict=True):
        assert qwen.lower_bound(text, 0) <= count, text


def test_bound_is_tight_enough_to_matter_on_prose(qwen: ChatTokenizer) -> None:
    rng = random.Random(2)
    vocabulary = ["the", "server", "answered", "quickly,", "while", "tokens", "streamed", "in."]
    prose = " ".join(rng.choice(vocabulary) for _ in range(3000))
    count = qwen.count_texts([prose])[0]
    bound = qwen.lower_bound(prose, 1024)
    assert 0.6 * count <= bound <= count
    assert qwen.lower_bound("short", 1024) == 0  # cannot beat the room: not computed


def test_a_provably_long_candidate_is_never_encoded(qwen: ChatTokenizer) -> None:
    long_reply = "the answer streamed back, word after word. " * 600  # ~27k characters
    messages = [
        {"role": "user", "content": "question one"},
        {"role": "assistant", "content": long_reply},
        {"role": "user", "content": "and now?"},
    ]
    encoded: list[str] = []
    original = qwen.count_texts

    def spy(texts: Any) -> list[int]:
        encoded.extend(texts)
        return original(texts)

    qwen.count_texts = spy  # type: ignore[method-assign]
    try:
        assert PrefixCounter(qwen)(messages, 1024) > 1024
    finally:
        del qwen.count_texts
    assert not any(long_reply in text for text in encoded)
    assert qwen.count_texts([qwen.render(messages)])[0] > 1024


def _backend_with(pattern: str | None) -> Any:
    spec = json.loads(Path(QWEN_DIR, "tokenizer.json").read_text())
    if pattern is not None:
        spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = pattern
    return Tokenizer.from_str(json.dumps(spec))


def test_only_known_split_patterns_get_the_pre_token_bound() -> None:
    known = SegmentBound.for_backend(_backend_with(None), [])
    assert known is not None and known.digits == "each"
    # Another pattern might put two words in one pre-token: bytes only.
    other = SegmentBound.for_backend(_backend_with(r"[^\n]+|\n"), [])
    assert other is not None and other.digits is None
    prose = "many short words here " * 500
    assert known.of(prose, 100) > 1000
    assert other.of(prose, 100) == -(-len(prose) // 128)  # bytes over the longest token


def test_gpt2_byte_level_pattern_bound_holds_on_a_trained_bpe() -> None:
    from tokenizers import models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(_texts(3, 300), trainer=trainer)
    bound = SegmentBound.for_backend(tok, [])
    assert bound is not None and bound.digits == "runs"
    for text in _texts(4, 300) + PIECES:
        count = len(tok.encode(text, add_special_tokens=False).ids)
        assert bound.of(text, 0) <= count, text

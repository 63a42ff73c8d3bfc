"""Prompt token counting: the real tokenizer's chat template, or the bytes/4 approximation."""

from __future__ import annotations

import pytest

from inferlab_bench.errors import TokenizerError
from inferlab_bench.simulator.prompt import (
    Overlong,
    PromptTokenizer,
    approximate_ids,
    flatten_content,
)


def test_approximation_is_bytes_over_four_rounded_up() -> None:
    assert len(approximate_ids("")) == 1
    assert len(approximate_ids("abcd")) == 1
    assert len(approximate_ids("abcde")) == 2
    assert len(approximate_ids("é" * 3)) == 2  # 6 bytes


def test_content_parts_are_joined() -> None:
    parts = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]
    assert flatten_content(parts) == [{"role": "user", "content": "a\nb"}]


def test_qwen_chat_and_text_counts(qwen_dir: str) -> None:
    tok = PromptTokenizer(qwen_dir)
    messages = [{"role": "user", "content": "hello"}]
    assert len(tok.chat_ids(messages, {})) == 9  # Qwen2: <|im_start|>user\nhello<|im_end|>\n...
    assert tok.text_ids("hello") == [14990]


def test_missing_tokenizer_is_a_tokenizer_error() -> None:
    with pytest.raises(TokenizerError, match="tokenizer /nonexistent/tokenizer/dir: not a local"):
        PromptTokenizer("/nonexistent/tokenizer/dir")


def test_counts_equal_the_tokenizer_own_chat_path(qwen_dir: str) -> None:
    # The simulator renders, then encodes the text with the backend (as preparation does);
    # the ids are apply_chat_template(tokenize=True)'s, special-token text included.
    from inferlab_bench.tokenizer import load_tokenizer

    tok = load_tokenizer(qwen_dir)
    ours = PromptTokenizer(qwen_dir)
    for messages in (
        [{"role": "user", "content": "hello <|im_start|> there\n\n  é 😀"}],
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "a" * 20000},
            {"role": "assistant", "content": "b c"},
            {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "text"}]},
        ],
    ):
        theirs = tok.apply_chat_template(
            flatten_content(messages), add_generation_prompt=True, tokenize=True
        )
        theirs = theirs["input_ids"] if hasattr(theirs, "keys") else theirs
        assert ours.chat_ids(messages, {}) == list(theirs)
    assert ours.text_ids("hello world é") == tok.encode("hello world é")


def test_a_prompt_beyond_the_limit_is_counted_not_listed(qwen_dir: str) -> None:
    import asyncio

    tok = PromptTokenizer(qwen_dir)
    text = "hello world " * 3000  # 6000 tokens, past the inline size: a worker counts it
    messages = [{"role": "user", "content": text}]
    count = len(tok.chat_ids(messages, {}))
    found = asyncio.run(tok.chat_prompt(messages, {}, count - 1))
    assert isinstance(found, Overlong) and found.tokens == count
    assert asyncio.run(tok.chat_prompt(messages, {}, count)) == tok.chat_ids(messages, {})
    fresh = PromptTokenizer(qwen_dir)  # nothing cached: the count comes from the encoding
    found = asyncio.run(fresh.text_prompt(text, 10))
    assert isinstance(found, Overlong) and found.tokens == len(tok.text_ids(text))
    tok.close()
    fresh.close()


def test_without_a_tokenizer_an_overlong_prompt_is_bytes_over_four() -> None:
    import asyncio

    found = asyncio.run(PromptTokenizer(None).text_prompt("x" * 100_001, 100))
    assert found == Overlong(25001)


def test_decode_is_the_tokenizer_own_and_long_ones_go_off_the_loop(qwen_dir: str) -> None:
    import asyncio
    import random

    from inferlab_bench.tokenizer import load_tokenizer

    theirs = load_tokenizer(qwen_dir)
    ours = PromptTokenizer(qwen_dir)
    draw = random.Random(7)
    for n in (1, 50, 20000):  # 20000 > INLINE_IDS: a worker decodes it
        ids = [draw.randrange(len(theirs)) for _ in range(n)]
        assert asyncio.run(ours.text_of(ids)) == theirs.decode(ids)
        assert asyncio.run(ours.strs_of(ids)) == theirs.convert_ids_to_tokens(ids)
    ours.close()

"""Prompt token counting: the real tokenizer's chat template, or the bytes/4 approximation."""

from __future__ import annotations

import pytest

from inferlab_bench.errors import TokenizerError
from inferlab_bench.simulator.prompt import PromptTokenizer, approximate_ids, flatten_content


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

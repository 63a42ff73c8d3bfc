"""Prompt token ids: the model's tokenizer and chat template, or a documented approximation.

With a tokenizer directory, chat messages are rendered with its chat template
(``add_generation_prompt=True`` plus the request's ``chat_template_kwargs``) and
tokenized, exactly as a client's preparation counts them; completion prompts are encoded
with the tokenizer's default special tokens, as vLLM does. Without one, the prompt text
(chat messages rendered as ``<|role|>\\ncontent\\n`` and a trailing ``<|assistant|>\\n``)
is cut into 4-byte UTF-8 pieces, one pseudo token each: ceil(bytes / 4), at least 1.
This is the only module that imports transformers.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from inferlab_bench.errors import TokenizerError
from inferlab_bench.tokenizer import load_tokenizer

Messages = list[dict[str, Any]]


def flatten_content(messages: Sequence[Mapping[str, Any]]) -> Messages:
    """Join text-only content parts with newlines, as vLLM does for string-content templates."""
    flat: Messages = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            texts = [p.get("text", "") for p in content if isinstance(p, dict)]
            message = {**message, "content": "\n".join(texts)}
        flat.append(dict(message))
    return flat


def approximate_ids(text: str) -> list[int]:
    """Pseudo token ids: one per 4 bytes of UTF-8 (rounded up), at least one."""
    data = text.encode("utf-8")
    ids = [int.from_bytes(data[i : i + 4], "little") for i in range(0, len(data), 4)]
    return ids or [0]


def approximate_text(ids: Sequence[int]) -> str:
    """The text behind pseudo ids (``approximate_ids`` undone; trailing NULs are lost)."""
    data = b"".join(i.to_bytes(4, "little") for i in ids).rstrip(b"\0")
    return data.decode("utf-8", errors="replace")


def render_plain(messages: Sequence[Mapping[str, Any]]) -> str:
    """The tokenizer-free rendering of chat messages used by the approximation."""
    parts = [f"<|{m.get('role', '')}|>\n{m.get('content') or ''}\n" for m in messages]
    return "".join(parts) + "<|assistant|>\n"


class PromptTokenizer:
    """Turns chat messages or completion prompts into token ids (cached by content)."""

    def __init__(self, tokenizer_dir: str | None) -> None:
        self.tokenizer_dir = tokenizer_dir
        self._tokenizer = _load(tokenizer_dir) if tokenizer_dir else None
        if self._tokenizer is not None:
            # Compile the chat template now: the first render costs ~100 ms, which would
            # otherwise block the event loop during the first request.
            self.chat_ids([{"role": "user", "content": "warm-up"}], {})

    def chat_ids(
        self, messages: Sequence[Mapping[str, Any]], kwargs: Mapping[str, Any]
    ) -> list[int]:
        """Token ids of the rendered chat prompt (generation prompt included)."""
        key = orjson.dumps([flatten_content(messages), kwargs], option=orjson.OPT_SORT_KEYS)
        return list(self._chat_cached(key))

    def text_ids(self, prompt: str) -> list[int]:
        """Token ids of a completion prompt."""
        return list(self._text_cached(prompt))

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one instance per server, bounded
    def _chat_cached(self, key: bytes) -> tuple[int, ...]:
        messages, kwargs = orjson.loads(key)
        if self._tokenizer is None:
            return tuple(approximate_ids(render_plain(messages)))
        try:
            out = self._tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, **kwargs
            )
        except Exception as exc:  # jinja2 / template errors come in many types
            raise TokenizerError(f"chat template failed: {exc}") from exc
        ids = out["input_ids"] if isinstance(out, Mapping) else out
        return tuple(int(i) for i in ids)

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one instance per server, bounded
    def _text_cached(self, prompt: str) -> tuple[int, ...]:
        if self._tokenizer is None:
            return tuple(approximate_ids(prompt))
        return tuple(int(i) for i in self._tokenizer.encode(prompt))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (special tokens kept, as vLLM's /detokenize does)."""
        if self._tokenizer is None:
            return approximate_text(ids)
        try:
            return str(self._tokenizer.decode(list(ids)))
        except (OverflowError, TypeError, ValueError, IndexError) as exc:
            raise TokenizerError(f"cannot decode these token ids: {exc}") from exc

    def token_strs(self, ids: Sequence[int]) -> list[str]:
        """Each id's own token string."""
        if self._tokenizer is None:
            return [approximate_text([i]) for i in ids]
        return [str(t) for t in self._tokenizer.convert_ids_to_tokens(list(ids))]


def _load(tokenizer_dir: str) -> Any:
    return load_tokenizer(tokenizer_dir, field="tokenizer")

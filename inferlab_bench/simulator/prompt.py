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

import asyncio
import hashlib
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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


# A prompt whose text (or flattened messages) is at most this many characters is
# tokenized on the event loop (about a millisecond); a longer one on one of two worker
# threads. The tokenizers library lets go of the GIL while it encodes a batch, so the loop
# keeps serving; two workers bound the memory that encodings in flight hold.
INLINE_CHARS = 16384
INLINE_IDS = 4096  # the same for ids turned back into text
WORKERS = 2
# Token ids kept for prompts seen recently (4 bytes each): 2M ids, 8 MB.
CACHE_TOKENS = 2_000_000


@dataclass(frozen=True)
class Overlong:
    """A prompt with more tokens than the limit it was counted against (its ids not kept)."""

    tokens: int


class PromptTokenizer:
    """Turns chat messages or completion prompts into token ids (cached by content)."""

    def __init__(self, tokenizer_dir: str | None) -> None:
        self.tokenizer_dir = tokenizer_dir
        self._tokenizer = _load(tokenizer_dir) if tokenizer_dir else None
        self._backend = getattr(self._tokenizer, "backend_tokenizer", None)
        self._cleans_up = bool(getattr(self._tokenizer, "clean_up_tokenization_spaces", True))
        self._cache = _IdsCache(CACHE_TOKENS)
        self._workers = ThreadPoolExecutor(WORKERS, thread_name_prefix="inferlab-tokenize")
        if self._tokenizer is not None:
            # Compile the chat template now: the first render costs ~100 ms, which would
            # otherwise block the event loop during the first request.
            self.chat_ids([{"role": "user", "content": "warm-up"}], {})

    def chat_ids(
        self, messages: Sequence[Mapping[str, Any]], kwargs: Mapping[str, Any]
    ) -> list[int]:
        """Token ids of the rendered chat prompt (generation prompt included)."""
        found = self._chat(flatten_content(messages), kwargs, None)
        assert not isinstance(found, Overlong)  # no limit, never overlong
        return found

    def text_ids(self, prompt: str) -> list[int]:
        """Token ids of a completion prompt."""
        found = self._text(prompt, None)
        assert not isinstance(found, Overlong)
        return found

    async def chat_prompt(
        self, messages: Sequence[Mapping[str, Any]], kwargs: Mapping[str, Any], limit: int
    ) -> list[int] | Overlong:
        """``chat_ids``, or ``Overlong`` beyond ``limit``; a long prompt is counted off the loop."""
        flat = flatten_content(messages)
        size = sum(len(str(m.get("content") or "")) for m in flat)
        if size <= INLINE_CHARS and len(flat) <= 64:
            return self._chat(flat, kwargs, limit)
        return await self._off_loop(self._chat, flat, kwargs, limit)

    async def text_prompt(self, prompt: str, limit: int) -> list[int] | Overlong:
        """``text_ids``, or ``Overlong`` beyond ``limit``; a long prompt is counted off the loop."""
        if len(prompt) <= INLINE_CHARS:
            return self._text(prompt, limit)
        return await self._off_loop(self._text, prompt, limit)

    async def _off_loop(self, work: Callable[..., Ids], *args: Any) -> Ids:
        return await asyncio.get_running_loop().run_in_executor(self._workers, work, *args)

    def close(self) -> None:
        """Stop the worker threads (a prompt being encoded is finished first)."""
        self._workers.shutdown(wait=False, cancel_futures=True)

    def _chat(self, flat: Messages, kwargs: Mapping[str, Any], limit: int | None) -> Ids:
        try:
            key = orjson.dumps([flat, kwargs], option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError as exc:  # nested deeper than orjson writes (254)
            raise TokenizerError(f"messages cannot be rendered: {exc}") from exc
        return self._cached(b"chat\0" + key, lambda: self._render(flat, kwargs), False, limit)

    def _text(self, prompt: str, limit: int | None) -> Ids:
        return self._cached(
            b"text\0" + prompt.encode("utf-8", "surrogatepass"), lambda: prompt, True, limit
        )

    def _cached(self, key: bytes, text: Callable[[], str], special: bool, limit: int | None) -> Ids:
        digest = hashlib.blake2b(key, digest_size=16).digest()
        hit = self._cache.get(digest)
        if hit is not None:
            return list(hit) if limit is None or len(hit) <= limit else Overlong(len(hit))
        found = self._encode(text(), special, limit)
        if not isinstance(found, Overlong):
            self._cache.put(digest, found)
        return found

    def _render(self, flat: Messages, kwargs: Mapping[str, Any]) -> str:
        if self._tokenizer is None:
            return render_plain(flat)
        try:
            text = self._tokenizer.apply_chat_template(
                flat, add_generation_prompt=True, tokenize=False, **kwargs
            )
        except Exception as exc:  # jinja2 / template errors come in many types
            raise TokenizerError(f"chat template failed: {exc}") from exc
        return str(text)

    def _encode(self, text: str, special: bool, limit: int | None) -> Ids:
        """The ids of ``text`` (a rendered chat adds no special tokens of its own)."""
        if self._tokenizer is None:
            count = max(1, -(-len(text.encode("utf-8")) // 4))
            return approximate_ids(text) if limit is None or count <= limit else Overlong(count)
        if self._backend is None:  # a slow tokenizer: no count before the ids
            ids = [int(i) for i in self._tokenizer.encode(text, add_special_tokens=special)]
            return ids if limit is None or len(ids) <= limit else Overlong(len(ids))
        # The batch call of one text: unlike ``encode`` it lets go of the GIL while it
        # works (so the event loop keeps serving), and the fast one skips the offsets.
        batch = getattr(self._backend, "encode_batch_fast", self._backend.encode_batch)
        encoding = batch([text], add_special_tokens=special)[0]
        # The count comes without listing the ids, which for a huge prompt holds the GIL.
        if limit is not None and len(encoding) > limit:
            return Overlong(len(encoding))
        return [int(i) for i in encoding.ids]

    async def text_of(self, ids: Sequence[int]) -> str:
        """``decode``, off the event loop for more than ``INLINE_IDS`` ids."""
        if len(ids) <= INLINE_IDS:
            return self.decode(ids)
        return await asyncio.get_running_loop().run_in_executor(self._workers, self.decode, ids)

    async def strs_of(self, ids: Sequence[int]) -> list[str]:
        """``token_strs``, off the event loop for more than ``INLINE_IDS`` ids."""
        if len(ids) <= INLINE_IDS:
            return self.token_strs(ids)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._workers, self.token_strs, ids)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (special tokens kept, as vLLM's /detokenize does)."""
        if self._tokenizer is None:
            return approximate_text(ids)
        try:
            if self._backend is not None and not self._cleans_up:
                # The batch call lets go of the GIL (``decode`` holds it: 745 ms for
                # 150k ids); without the cleanup of spaces it is the same text.
                return str(self._backend.decode_batch([list(ids)], skip_special_tokens=False)[0])
            return str(self._tokenizer.decode(list(ids)))
        except (OverflowError, TypeError, ValueError, IndexError) as exc:
            raise TokenizerError(f"cannot decode these token ids: {exc}") from exc

    def token_strs(self, ids: Sequence[int]) -> list[str]:
        """Each id's own token string."""
        if self._tokenizer is None:
            return [approximate_text([i]) for i in ids]
        return [str(t) for t in self._tokenizer.convert_ids_to_tokens(list(ids))]


Ids = list[int] | Overlong


class _IdsCache:
    """Ids of recently tokenized prompts by content digest, at most ``budget`` ids in all.

    Used from the event loop and the worker threads, hence the lock.
    """

    def __init__(self, budget: int) -> None:
        self._entries: OrderedDict[bytes, array[int]] = OrderedDict()
        self._held = 0
        self._budget = budget
        self._lock = threading.Lock()

    def get(self, digest: bytes) -> array[int] | None:
        with self._lock:
            ids = self._entries.get(digest)
            if ids is not None:
                self._entries.move_to_end(digest)
            return ids

    def put(self, digest: bytes, ids: list[int]) -> None:
        if len(ids) > self._budget or min(ids, default=0) < 0:
            return
        try:
            packed = array("I", ids)
        except OverflowError:  # an id beyond 32 bits: not worth a wider cache
            return
        with self._lock:
            if digest in self._entries:
                return
            self._entries[digest] = packed
            self._held += len(packed)
            while self._held > self._budget:
                _, old = self._entries.popitem(last=False)
                self._held -= len(old)


def _load(tokenizer_dir: str) -> Any:
    return load_tokenizer(tokenizer_dir, field="tokenizer")

"""The only transformers use: load the model's tokenizer, render chat templates, count tokens."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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


class ChatTokenizer:
    """A model tokenizer as preparation uses it: exact chat-template token counts, plus a
    cheap, provable lower bound where the tokenizer's structure allows one."""

    def __init__(self, locator: str, template_kwargs: Mapping[str, Any] | None = None) -> None:
        self.locator = locator
        self.template_kwargs = dict(template_kwargs or {})
        self._tok = _load(locator)
        self._backend = getattr(self._tok, "backend_tokenizer", None)
        self._bound = _ByteBound.for_backend(self._tok, self._backend)
        self._splitter = _added_token_splitter(self._tok, self._backend)

    def render(self, messages: Sequence[Mapping[str, str]]) -> str:
        try:
            text = self._tok.apply_chat_template(
                list(messages), add_generation_prompt=True, tokenize=False, **self.template_kwargs
            )
        except Exception as exc:  # jinja errors, missing template: all one failure to the user
            raise TokenizerError(f"{self.locator}: chat template failed: {exc}") from exc
        return str(text)

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Exact token counts of already-rendered texts (no special tokens added), batched."""
        if not texts:
            return []
        if self._backend is not None and len(texts) == 1:
            return [len(self._backend.encode(texts[0], add_special_tokens=False).ids)]
        if self._backend is not None:
            encodings = self._backend.encode_batch(list(texts), add_special_tokens=False)
            return [len(e.ids) for e in encodings]
        return [len(self._tok(t, add_special_tokens=False)["input_ids"]) for t in texts]

    def lower_bound(self, text: str) -> int:
        """A number never above ``count_texts([text])[0]``; 0 when no bound is provable."""
        return 0 if self._bound is None else self._bound.of(text)

    def split_segments(self, text: str) -> tuple[list[str], int] | None:
        """Cut ``text`` at added tokens the way the tokenizer does: (segments, #added tokens).

        None when this tokenizer's added tokens are matched in ways we do not mirror
        (normalized, stripping, single-word) or there is no fast backend.
        """
        if self._splitter is None:
            return None
        pieces = self._splitter.split(text)
        return [p for p in pieces if p], len(pieces) - 1


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


def _added_token_splitter(tok: Any, backend: Any) -> re.Pattern[str] | None:
    added = list(getattr(tok, "added_tokens_decoder", {}).values())
    if backend is None or not added:
        return None
    if any(a.normalized or a.lstrip or a.rstrip or a.single_word for a in added):
        return None
    # Longest first: the tokenizer takes the leftmost-longest added token.
    contents = sorted({a.content for a in added}, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, contents)))


class _ByteBound:
    """tokens >= ceil(bytes / longest token) for byte-level BPE.

    With a ByteLevel pre-tokenizer every token covers a whole number of bytes of its
    segment and no token is unknown, so a text of B bytes needs at least B / L tokens,
    L being the longest vocabulary entry in bytes. Added tokens are cut out before
    normalization (we require them non-normalized and not stripping), so segments are
    normalized separately here exactly as the tokenizer does.
    """

    def __init__(self, longest: int, normalizer: Any, specials: list[str]) -> None:
        self._longest = longest
        self._normalizer = normalizer
        self._split = re.compile("|".join(map(re.escape, sorted(specials, key=len, reverse=True))))
        self._specials = specials

    @classmethod
    def for_backend(cls, tok: Any, backend: Any) -> _ByteBound | None:
        if backend is None or type(backend.model).__name__ != "BPE":
            return None
        if "ByteLevel" not in repr(backend.pre_tokenizer):
            return None
        normalizer = backend.normalizer
        if normalizer is not None and type(normalizer).__name__ not in (
            "NFC",
            "NFKC",
            "NFD",
            "NFKD",
        ):
            return None
        added = list(getattr(tok, "added_tokens_decoder", {}).values())
        if any(a.normalized or a.lstrip or a.rstrip or a.single_word for a in added):
            return None
        specials = [a.content for a in added]
        longest = max([len(k) for k in backend.get_vocab()] + [len(s.encode()) for s in specials])
        return (
            cls(longest, normalizer, specials) if specials else cls(longest, normalizer, ["\0\0"])
        )

    def of(self, text: str) -> int:
        total = 0
        for segment in self._split.split(text):
            if self._normalizer is not None:
                segment = self._normalizer.normalize_str(segment)
            total += len(segment.encode("utf-8"))
        total += sum(len(m.encode()) for m in self._split.findall(text))
        return math.ceil(total / self._longest)


class PrefixCounter:
    """``CountUpTo`` for one conversation: counts by segments, stops once past the limit.

    HF tokenizers cut added tokens out first and tokenize each remaining segment alone, so
    count(text) = #added tokens + sum(count(segment)). Segments repeat across the candidate
    inputs of one conversation and are counted once; a segment whose byte bound already
    exceeds what is left of the limit is never tokenized. A count within the limit is
    confirmed by encoding the whole rendered text; any disagreement falls back to it.
    """

    def __init__(self, tokenizer: ChatTokenizer) -> None:
        self._tok = tokenizer
        self._counts: dict[str, int] = {}
        self.confirmed = 0
        self.fallbacks = 0

    def __call__(self, messages: list[dict[str, str]], limit: int) -> int:
        text = self._tok.render(messages)
        split = self._tok.split_segments(text)
        if split is None:
            return self._tok.count_texts([text])[0]
        segments, specials = split
        total = specials
        for segment in segments:
            total += self._segment(segment, limit - total)
            if total > limit:
                return total
        exact = self._tok.count_texts([text])[0]
        self.confirmed += 1
        if exact != total:
            self.fallbacks += 1
        return exact

    def _segment(self, segment: str, room: int) -> int:
        if segment in self._counts:
            return self._counts[segment]
        bound = self._tok.lower_bound(segment)
        if bound > room:
            return bound  # provably too long: never tokenized
        count = self._tok.count_texts([segment])[0]
        self._counts[segment] = count
        return count

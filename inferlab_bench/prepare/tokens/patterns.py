"""The pre-tokenizer split patterns we have read to the character, and ByteLevel's alphabet.

Shared by ``bounds`` (bounds from a pattern's letter and digit rules) and ``pretoken``
(exact counts by word).
"""

from __future__ import annotations

import json
from typing import Any

_QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
PATTERNS = {_QWEN2: "each", _LLAMA3: "runs"}
"""Split patterns we have read through, and how their digits split: one pre-token per
digit ("each") or at least one per run of digits ("runs"). ByteLevel's own GPT-2 pattern
(``use_regex``: `` ?\\p{L}+| ?\\p{N}+ | ...``) is "runs"."""


def byte_chars() -> list[str]:
    """The 256 characters ByteLevel writes bytes as (printable bytes as themselves, the
    others shifted past U+0100, in byte order)."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    shifted = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(shifted)) for b in range(256)]


def pre_tokenizer_spec(backend: Any) -> dict[str, Any] | None:
    """The backend's pre-tokenizer as its JSON spec ({} for none; None if unreadable).

    Read from the pre-tokenizer alone: ``backend.to_str()`` would serialize the whole
    vocabulary and merges (over a second for Qwen2's).
    """
    pre_tokenizer = getattr(backend, "pre_tokenizer", None)
    if pre_tokenizer is None:
        return {}
    try:
        spec = json.loads(pre_tokenizer.__getstate__())
    except (ValueError, AttributeError, TypeError):
        return None
    return spec if isinstance(spec, dict) else None

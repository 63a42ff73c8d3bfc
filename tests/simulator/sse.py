"""Reading an SSE body back into its events (test helper)."""

from __future__ import annotations

from typing import Any

import orjson


def events(text: str) -> list[str]:
    """The data payloads of every event, in order (``[DONE]`` included)."""
    out = []
    for block in text.split("\n\n"):
        if block.strip():
            assert block.startswith("data: "), block
            out.append(block[len("data: ") :])
    return out


def parsed(text: str) -> tuple[list[dict[str, Any]], bool]:
    """The JSON chunks and whether the stream ended with ``[DONE]``."""
    payloads = events(text)
    done = bool(payloads) and payloads[-1] == "[DONE]"
    return [orjson.loads(p) for p in payloads if p != "[DONE]"], done


def content(chunks: list[dict[str, Any]]) -> list[str]:
    """Every non-empty content delta (one per generated token)."""
    out = []
    for chunk in chunks:
        for choice in chunk["choices"]:
            text = choice.get("delta", {}).get("content") or choice.get("text")
            if text:
                out.append(text)
    return out

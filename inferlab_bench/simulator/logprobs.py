"""Token log-probabilities for ``logprobs`` requests: made-up, seeded by position (pure).

The simulator samples nothing, so the figures only have to be well-formed and stable: the
emitted token is always the most likely one, and its alternatives are the next words of
``WORDS``, each one nat less likely than the one before.
"""

from __future__ import annotations

from typing import Any

from inferlab_bench.simulator.plan import WORDS, token_id


def _chosen_logprob(index: int, position: int) -> float:
    return -round(0.05 + 0.1 * ((7 * index + position) % 10), 4)


def _alternatives(index: int, position: int, top: int) -> list[tuple[str, float]]:
    """The ``top`` most likely tokens (at least the emitted one), most likely first."""
    first = token_id(index, position)
    best = _chosen_logprob(index, position)
    count = min(max(top, 1), len(WORDS))
    return [(WORDS[(first + k) % len(WORDS)], best - k) for k in range(count)]


def chat_entry(index: int, position: int, top: int) -> dict[str, Any]:
    """One ``choices[].logprobs.content[]`` entry of a chat answer."""
    alternatives = _alternatives(index, position, top)[:top]
    token, logprob = _alternatives(index, position, 1)[0]
    return {
        "token": token,
        "logprob": logprob,
        "bytes": list(token.encode()),
        "top_logprobs": [
            {"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in alternatives
        ],
    }


def chat_logprobs(index: int, positions: range, top: int) -> dict[str, Any]:
    """``choices[].logprobs`` of a chat answer covering ``positions``."""
    return {"content": [chat_entry(index, p, top) for p in positions]}


def completion_logprobs(index: int, positions: range, top: int, offset: int) -> dict[str, Any]:
    """``choices[].logprobs`` of a text completion; ``offset`` is the first token's offset."""
    tokens: list[str] = []
    offsets: list[int] = []
    for position in positions:
        offsets.append(offset)
        token = _alternatives(index, position, 1)[0][0]
        tokens.append(token)
        offset += len(token)
    return {
        "tokens": tokens,
        "token_logprobs": [_chosen_logprob(index, p) for p in positions],
        "top_logprobs": [dict(_alternatives(index, p, top)) for p in positions],
        "text_offset": offsets,
    }

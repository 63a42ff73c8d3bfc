"""How much of its prompt each first request after a reset may legitimately find cached.

Right after a reset the earliest request must hit nothing. Its siblings of the first wave
start moments later and may find what the earlier ones just wrote: at most the token
prefix their prompts share with a prompt that started before them (the chat template's
system preamble, a common opening). Anything cached beyond that came from before the reset.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

from inferlab_bench.tokenizer import common_prefix_length, load_tokenizer


def prefix_bounds(prompts: Sequence[Sequence[int]]) -> list[int]:
    """Per prompt, in start order: the most tokens it shares with any earlier one (0 first).

    The earlier prompts are kept sorted: the longest prefix a prompt shares with any of them
    is the longer of those shared with its two neighbours in that order, so each prompt is
    compared twice instead of with every earlier one (a first wave of 256 near-identical
    1k-token prompts would otherwise cost some 30 million comparisons).
    """
    earlier: list[tuple[int, ...]] = []
    bounds = []
    for prompt in map(tuple, prompts):
        at = bisect.bisect_left(earlier, prompt)
        neighbours = earlier[max(0, at - 1) : at + 1]
        bounds.append(max((common_prefix_length(prompt, n) for n in neighbours), default=0))
        earlier.insert(at, prompt)
    return bounds


def prompt_token_ids(
    locator: str,
    conversations: Sequence[list[dict[str, Any]]],
    template_kwargs: Mapping[str, Any],
) -> list[list[int]]:
    """Each conversation as the server sees it: the chat template with the generation prompt."""
    tokenizer = load_tokenizer(locator)
    out = []
    for messages in conversations:
        ids = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, **dict(template_kwargs)
        )
        out.append(list(ids["input_ids"] if isinstance(ids, Mapping) else ids))
    return out

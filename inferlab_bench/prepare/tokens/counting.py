"""Exact counts of many texts on every core: forked workers inherit the loaded tokenizer."""

from __future__ import annotations

import multiprocessing
import os
from typing import TYPE_CHECKING, Any

from inferlab_bench.prepare.tokens.pretoken import WordMemory

if TYPE_CHECKING:
    from inferlab_bench.prepare.tokens.tokenize import ChatTokenizer

_PARALLEL_CHARS = 200_000
"""Below this many characters a fork costs more than it saves."""
_SHARED: dict[str, Any] = {}


def count_on_all_cores(
    tok: ChatTokenizer, texts: list[str], workers: int | None = None
) -> list[int]:
    """``tok.count_texts(texts)``, spread over the cores: forked children inherit the loaded
    tokenizer and count every n-th text while this process counts the rest (each process
    runs ``count_texts``'s own check on its first texts)."""
    count = workers or min(len(os.sched_getaffinity(0)), 8)
    if count <= 1 or sum(map(len, texts)) < _PARALLEL_CHARS:
        return tok.count_texts(texts)
    tok.learn_characters(texts)
    _SHARED.update(tok=tok, texts=texts, step=count)
    try:
        context = multiprocessing.get_context("fork")
        with context.Pool(count - 1, initializer=quiet_tokenizers) as pool:
            pending = pool.map_async(_count_share, range(1, count))
            mine = tok.count_texts(texts[0::count])
            theirs = pending.get()
    finally:
        _SHARED.clear()
    shares = [mine]
    for share, learned in theirs:
        shares.append(share)
        if learned is not None:
            tok.absorb_words(learned)  # kept for the next run with the parent's own
    counts = [0] * len(texts)
    for k, share in enumerate(shares):
        counts[k::count] = share
    return counts


def quiet_tokenizers() -> None:
    """A forked worker's tokenizers library must not start threads of its own."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def _count_share(k: int) -> tuple[list[int], WordMemory | None]:
    tok: ChatTokenizer = _SHARED["tok"]
    return tok.count_texts(_SHARED["texts"][k :: _SHARED["step"]]), tok.learned_words()

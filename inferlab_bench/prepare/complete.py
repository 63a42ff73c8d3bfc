"""Exact counts for chosen entries that the bounds admitted without counting.

The population records every chosen entry's input and target token counts, so those few are
counted here, after selection; the rest of the table keeps only what its decisions needed.
Each count is checked against the bound that admitted it: a count past the limit, or a
target under two tokens, would mean a bound was wrong, and that fails the preparation
rather than freezing a population the census does not describe.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from inferlab_bench.errors import TokenizerError
from inferlab_bench.prepare.materialize import UNCOUNTED, Conversation
from inferlab_bench.prepare.pretoken import WordMemory
from inferlab_bench.prepare.table import int_column
from inferlab_bench.prepare.tokenize import ChatTokenizer


@dataclass(frozen=True)
class Chosen:
    """One chosen row: its table position, conversation, split, and counts (maybe
    ``UNCOUNTED``)."""

    position: int
    conversation: Conversation
    end: int
    input_tokens: int
    target_tokens: int

    @property
    def complete(self) -> bool:
        return UNCOUNTED not in (self.input_tokens, self.target_tokens)


class Kept(Protocol):
    """The tokenizer kept by ``tokenstore``: renders from verified plans only, and counts
    (None when it cannot, then the real tokenizer counts)."""

    def planned(self, messages: Sequence[Mapping[str, str]]) -> str | None: ...

    def count(self, texts: list[str]) -> list[int] | None: ...


class Tokenizers(Protocol):
    """Where counts come from: the real tokenizer (made on demand), or the one kept by
    ``tokenstore`` (None when there is none, or the real one is already loaded)."""

    def __call__(self) -> ChatTokenizer: ...

    def kept(self) -> Kept | None: ...


def complete_counts(
    chosen: Sequence[Chosen],
    tokenizers: Tokenizers,
    max_input: int,
) -> list[Chosen]:
    """``chosen`` with every count exact; only the missing ones are counted (an input
    counted when the table was built keeps its count), a tokenizer is only made if one is
    missing, and the real one only if the kept one cannot render every input to count
    from a verified plan."""
    missing = [c for c in chosen if not c.complete]
    if not missing:
        return list(chosen)
    inputs = [c for c in missing if c.input_tokens == UNCOUNTED]
    chats = [c.conversation.chat(c.end) for c in inputs]
    targets = [c.conversation.messages[c.end][1] for c in missing if c.target_tokens == UNCOUNTED]
    counts = _kept_counts(tokenizers.kept(), chats, targets)
    if counts is None:
        tok = tokenizers()
        counts = count_on_all_cores(tok, [tok.render(chat) for chat in chats] + targets)
    input_counts = iter(counts[: len(chats)])
    target_counts = iter(counts[len(chats) :])
    counted = {}
    for c in missing:
        n_input = next(input_counts) if c.input_tokens == UNCOUNTED else c.input_tokens
        n_target = next(target_counts) if c.target_tokens == UNCOUNTED else c.target_tokens
        _check(c, n_input, n_target, max_input)
        counted[c.position] = Chosen(c.position, c.conversation, c.end, n_input, n_target)
    return [counted.get(c.position, c) for c in chosen]


def _kept_counts(
    kept: Kept | None, chats: list[list[dict[str, str]]], targets: list[str]
) -> list[int] | None:
    """Counts of the rendered ``chats`` then ``targets`` by the kept tokenizer, if every
    input renders from a verified plan and it counts them; else None."""
    if kept is None:
        return None
    texts = [kept.planned(chat) for chat in chats]
    rendered = [text for text in texts if text is not None]
    if len(rendered) != len(texts):
        return None
    return kept.count(rendered + targets)


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
        with context.Pool(count - 1, initializer=_quiet_tokenizers) as pool:
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


def _quiet_tokenizers() -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def _count_share(k: int) -> tuple[list[int], WordMemory | None]:
    tok: ChatTokenizer = _SHARED["tok"]
    return tok.count_texts(_SHARED["texts"][k :: _SHARED["step"]]), tok.learned_words()


def _check(c: Chosen, n_input: int, n_target: int, max_input: int) -> None:
    """An ``UNCOUNTED`` input was proved to fit, an ``UNCOUNTED`` target to have two tokens."""
    if n_input > max_input or (c.target_tokens == UNCOUNTED and n_target < 2):
        raise TokenizerError(_violated(c, n_input, n_target, max_input))


def _violated(c: Chosen, n_input: int, n_target: int, max_input: int) -> str:
    return (
        f"record {c.conversation.index}: its exact counts (input {n_input} of at most "
        f"{max_input}, target {n_target}) contradict the bound that admitted it "
        f"(table: input {c.input_tokens}, target {c.target_tokens}); this is a bug in "
        "inferlab_bench/prepare/bounds.py"
    )


def with_counts(table: pa.Table, chosen: Sequence[Chosen]) -> pa.Table | None:
    """``table`` with the chosen rows' counts filled in, or None if it had them all."""
    inputs = int_column(table, "input_tokens").copy()
    targets = int_column(table, "target_tokens").copy()
    positions = np.array([c.position for c in chosen], dtype=np.int64)
    new_inputs = np.array([c.input_tokens for c in chosen], dtype=np.int64)
    new_targets = np.array([c.target_tokens for c in chosen], dtype=np.int64)
    if positions.size == 0 or (
        np.array_equal(inputs[positions], new_inputs)
        and np.array_equal(targets[positions], new_targets)
    ):
        return None
    inputs[positions], targets[positions] = new_inputs, new_targets
    table = _replaced(table, "input_tokens", inputs)
    return _replaced(table, "target_tokens", targets)


def _replaced(table: pa.Table, name: str, values: npt.NDArray[np.int64]) -> pa.Table:
    """Built from a buffer, not a Python list (see ``table.int_column``)."""
    data = np.ascontiguousarray(values, dtype=np.int32)
    array = pa.Array.from_buffers(pa.int32(), len(data), [None, pa.py_buffer(data)])
    where = table.schema.get_field_index(name)
    return table.set_column(where, table.schema.field(name), array)

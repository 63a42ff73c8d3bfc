"""Exact counts for chosen entries that the bounds admitted without counting.

The population records every chosen entry's input and target token counts, so those few are
counted here, after selection; the rest of the table keeps only what its decisions needed.
Each count is checked against the bound that admitted it: a count past the limit, or a
target under two tokens, would mean a bound was wrong, and that fails the preparation
rather than freezing a population the census does not describe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from inferlab_bench.errors import TokenizerError
from inferlab_bench.prepare.materialize import UNCOUNTED, Conversation
from inferlab_bench.prepare.tokens import ChatTokenizer, store
from inferlab_bench.prepare.tokens.counting import count_on_all_cores
from inferlab_bench.prepare.tokentable import TokenTable


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


class Tokenizers:
    """The tokenizers a preparation may count with, each made on first use: the real one
    (through transformers; a warm run whose chosen entries all have counts never loads
    it) and the one ``store`` kept (read without transformers, with its word memory)."""

    def __init__(self, locator: str, template_kwargs: dict[str, Any], fingerprint: str) -> None:
        self.fingerprint = fingerprint
        self._args = (locator, template_kwargs)
        self._real: ChatTokenizer | None = None
        self._kept: ChatTokenizer | None = None
        self._kept_read = False
        self.kept_counted = False

    def __call__(self) -> ChatTokenizer:
        """The real tokenizer."""
        if self._real is None:
            self._real = ChatTokenizer(*self._args)
        return self._real

    def kept(self) -> ChatTokenizer | None:
        """The kept tokenizer (None when there is none, or the real one is loaded: it
        counts the same)."""
        if self._real is not None:
            return None
        if not self._kept_read:
            self._kept_read = True
            self._kept = store.load(*self._args, self.fingerprint)
        return self._kept

    @property
    def made(self) -> ChatTokenizer | None:
        """The real tokenizer, if this run loaded it."""
        return self._real

    def keep(self) -> None:
        """Keep what this run's tokenizer learned (``store.keep``) for the next run."""
        used = self._real if self._real is not None else self._kept
        if used is not None:
            store.keep(used, self.fingerprint)

    @property
    def loaded(self) -> str:
        """For the manifest: "transformers" (the real tokenizer), "kept" (``store``'s,
        without transformers) or "none"."""
        if self._real is not None:
            return "transformers"
        return "kept" if self.kept_counted else "none"


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
    counts = _kept_counts(tokenizers, chats, targets)
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
    tokenizers: Tokenizers, chats: list[list[dict[str, str]]], targets: list[str]
) -> list[int] | None:
    """Counts of the rendered ``chats`` then ``targets`` by the kept tokenizer, if there is
    one and every input renders from a verified plan; else None."""
    kept = tokenizers.kept()
    if kept is None:
        return None
    texts = [kept.planned(chat) for chat in chats]
    rendered = [text for text in texts if text is not None]
    if len(rendered) != len(texts):
        return None
    tokenizers.kept_counted = True
    return count_on_all_cores(kept, rendered + targets)


def _check(c: Chosen, n_input: int, n_target: int, max_input: int) -> None:
    """An ``UNCOUNTED`` input was proved to fit, an ``UNCOUNTED`` target to have two tokens."""
    if n_input > max_input or (c.target_tokens == UNCOUNTED and n_target < 2):
        raise TokenizerError(_violated(c, n_input, n_target, max_input))


def _violated(c: Chosen, n_input: int, n_target: int, max_input: int) -> str:
    return (
        f"record {c.conversation.index}: its exact counts (input {n_input} of at most "
        f"{max_input}, target {n_target}) contradict the bound that admitted it "
        f"(table: input {c.input_tokens}, target {c.target_tokens}); this is a bug in "
        "inferlab_bench/prepare/tokens/bounds.py"
    )


def with_counts(table: TokenTable, chosen: Sequence[Chosen]) -> TokenTable | None:
    """``table`` with the chosen rows' counts filled in, or None if it had them all."""
    return table.with_counts(
        [c.position for c in chosen],
        [c.input_tokens for c in chosen],
        [c.target_tokens for c in chosen],
    )

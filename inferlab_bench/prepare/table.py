"""The per-candidate token table: every conversation's outcome, built on both cores."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa

from inferlab_bench.prepare.materialize import (
    Choice,
    Conversation,
    Reason,
    choose_input,
    parse_conversation,
    source_id,
    target_reason,
)
from inferlab_bench.prepare.tokenize import ChatTokenizer, PrefixCounter, TokenRate
from inferlab_bench.progress import NULL_PROGRESS, ProgressSink

SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("source_id", pa.string()),
        ("reason", pa.string()),
        ("end", pa.int32()),
        ("total_messages", pa.int32()),
        ("input_tokens", pa.int32()),
        ("target_tokens", pa.int32()),
        ("payload", pa.binary()),
    ]
)
_CHUNK = 256


@dataclass(frozen=True)
class Row:
    index: int
    source_id: str
    reason: str | None
    end: int = -1
    total_messages: int = 0
    input_tokens: int = -1
    target_tokens: int = -1
    payload: bytes | None = None


def choose(conversation: Conversation, counter: PrefixCounter, max_input: int) -> Row | Choice:
    """The input split of one valid conversation, or its row when no input fits."""
    choice = choose_input(conversation, counter, max_input)
    if isinstance(choice, Reason):
        return Row(
            conversation.index,
            conversation.source_id,
            choice.value,
            total_messages=len(conversation.messages),
        )
    return choice


def with_target(conversation: Conversation, choice: Choice, target_tokens: int) -> Row:
    """The row of a conversation whose input fits, given its target's token count."""
    target = conversation.messages[choice.end][1]
    reason = target_reason(target, target_tokens)
    payload = orjson.dumps({"messages": conversation.chat(choice.end), "target": target})
    return Row(
        conversation.index,
        conversation.source_id,
        reason.value if reason else None,
        end=choice.end,
        total_messages=len(conversation.messages),
        input_tokens=choice.input_tokens,
        target_tokens=target_tokens,
        payload=None if reason else payload,
    )


def build_table(
    records: Sequence[Any],
    tok: ChatTokenizer,
    max_input: int,
    progress: ProgressSink = NULL_PROGRESS,
    workers: int | None = None,
) -> pa.Table:
    """Rows for every record, in file order; structural rejects never reach the tokenizer."""
    rows: list[Row] = []
    valid: list[Conversation] = []
    for index, record in enumerate(records):
        parsed = parse_conversation(index, record)
        if isinstance(parsed, Reason):
            rows.append(Row(index, source_id(index, record), parsed.value))
        else:
            valid.append(parsed)
    progress.begin("tokenizing conversations", len(valid), unit="conversations")
    for chunk in _evaluate_all(valid, tok, max_input, workers):
        rows.extend(chunk)
        progress.advance(len(chunk))
    progress.end()
    rows.sort(key=lambda r: r.index)
    return pa.Table.from_pylist([r.__dict__ for r in rows], schema=SCHEMA)


_WORKER: dict[str, Any] = {}


def _evaluate_all(
    valid: list[Conversation], tok: ChatTokenizer, max_input: int, workers: int | None
) -> Iterator[list[Row]]:
    chunks = [valid[i : i + _CHUNK] for i in range(0, len(valid), _CHUNK)]
    count = workers or min(len(os.sched_getaffinity(0)), 8)
    if count <= 1 or len(chunks) <= 1:
        for chunk in chunks:
            yield _evaluate_chunk_with(tok, max_input, chunk)
        return
    _WORKER.update(tok=tok, max_input=max_input)  # inherited by the forked workers
    context = multiprocessing.get_context("fork")
    with context.Pool(count, initializer=_quiet_tokenizers) as pool:
        yield from pool.imap(_evaluate_chunk, chunks)
    _WORKER.clear()


def _quiet_tokenizers() -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def _evaluate_chunk(chunk: list[Conversation]) -> list[Row]:
    return _evaluate_chunk_with(_WORKER["tok"], _WORKER["max_input"], chunk)


def _evaluate_chunk_with(
    tok: ChatTokenizer, max_input: int, chunk: list[Conversation]
) -> list[Row]:
    """Inputs one conversation at a time; then every target of the chunk in one batch."""
    rate = TokenRate()
    choices = [choose(c, PrefixCounter(tok, rate), max_input) for c in chunk]
    fitting = [(c, x) for c, x in zip(chunk, choices, strict=True) if isinstance(x, Choice)]
    counts = tok.count_texts([c.messages[x.end][1] for c, x in fitting])
    rows = {c.index: with_target(c, x, n) for (c, x), n in zip(fitting, counts, strict=True)}
    return [x if isinstance(x, Row) else rows[c.index] for c, x in zip(chunk, choices, strict=True)]

"""Building the per-candidate token table: every conversation's outcome, on both cores.

A row holds counts and the record's byte range in the source file, not its text: the
chosen few are read back from the (sha256-verified) source when a population is written,
so the cached table stays small and a warm preparation reads it in a moment. A count that
no decision needed is ``UNCOUNTED`` (-1) until its entry is chosen (``complete``). Workers
build Arrow batches (cheap to send back); the result is a ``tokentable.TokenTable``, which
a warm run reads without numpy or pyarrow.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from inferlab_bench.prepare.materialize import (
    UNCOUNTED,
    Choice,
    Conversation,
    Reason,
    choose_input,
    parse_conversation,
    source_id,
    target_reason,
)
from inferlab_bench.prepare.sharegpt import Records
from inferlab_bench.prepare.tokens.counting import quiet_tokenizers
from inferlab_bench.prepare.tokens.pretoken import WordMemory
from inferlab_bench.prepare.tokens.tokenize import ChatTokenizer, PrefixCounter, TokenRate
from inferlab_bench.prepare.tokentable import INT_COLUMNS, STRING_COLUMNS, TokenTable
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
        ("record_start", pa.int64()),
        ("record_stop", pa.int64()),
    ]
)
_CHUNK = 1024


@dataclass(frozen=True)
class Row:
    index: int
    source_id: str
    reason: str | None
    end: int = -1
    total_messages: int = 0
    input_tokens: int = -1
    target_tokens: int = -1
    record_start: int = -1
    record_stop: int = -1


def int_column(table: pa.Table, name: str) -> npt.NDArray[np.int64]:
    """A null-free integer column as numpy, read from its buffers.

    pyarrow 26 imports pandas (a third of a second) on the first ``to_numpy`` or
    Python-to-Arrow conversion, so the conversion to ``TokenTable`` uses neither.
    """
    dtype = np.dtype(f"int{table.schema.field(name).type.bit_width}")
    parts = []
    for chunk in table.column(name).chunks:
        if chunk.null_count:
            raise ValueError(f"token table column {name!r} has nulls")
        values = np.frombuffer(chunk.buffers()[1], dtype=dtype)
        parts.append(values[chunk.offset : chunk.offset + len(chunk)])
    joined = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
    return joined.astype(np.int64, copy=False)


def to_token_table(table: pa.Table) -> TokenTable:
    """The Arrow table as ``TokenTable`` columns."""
    ints = {name: int_column(table, name).tolist() for name in INT_COLUMNS}
    strings = {name: table.column(name).to_pylist() for name in STRING_COLUMNS}
    return TokenTable(**ints, **strings)


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


def with_target(
    conversation: Conversation, choice: Choice, target_tokens: int, span: tuple[int, int]
) -> Row:
    """The row of a conversation whose input fits, given its target's token count and the
    byte range its record came from."""
    target = conversation.messages[choice.end][1]
    reason = target_reason(target, target_tokens)
    start, stop = span if reason is None else (-1, -1)
    return Row(
        conversation.index,
        conversation.source_id,
        reason.value if reason else None,
        end=choice.end,
        total_messages=len(conversation.messages),
        input_tokens=UNCOUNTED if choice.input_tokens is None else choice.input_tokens,
        target_tokens=target_tokens,
        record_start=start,
        record_stop=stop,
    )


def build_table(
    records: Records,
    tok: ChatTokenizer,
    max_input: int,
    progress: ProgressSink = NULL_PROGRESS,
    workers: int | None = None,
) -> TokenTable:
    """Rows for every record, in file order; structural rejects never reach the tokenizer."""
    spans = [range(i, min(i + _CHUNK, len(records))) for i in range(0, len(records), _CHUNK)]
    batches: list[pa.RecordBatch] = []
    progress.begin("tokenizing conversations", len(records), unit="conversations")
    for batch, learned in _evaluate_all(records, spans, tok, max_input, workers):
        batches.append(batch)
        if learned is not None:
            tok.absorb_words(learned)  # kept with this process's own (``store``)
        progress.advance(batch.num_rows)
    progress.end()
    return to_token_table(pa.Table.from_batches(batches, schema=SCHEMA))


_WORKER: dict[str, Any] = {}


def _evaluate_all(
    records: Records,
    spans: list[range],
    tok: ChatTokenizer,
    max_input: int,
    workers: int | None,
) -> Iterator[tuple[pa.RecordBatch, WordMemory | None]]:
    """Batches of rows in file order, each with the words a forked worker counted for it.
    Forked workers inherit the records and the loaded tokenizer, so only index ranges go
    to them and only Arrow batches (built there, in parallel, and cheap to pickle) and the
    words new to them come back: the counts a later warm run may remember."""
    count = workers or min(len(os.sched_getaffinity(0)), 8)
    if count <= 1 or len(spans) <= 1:
        for span in spans:
            yield _evaluate_span(records, tok, max_input, span), None
        return
    tok.ready()
    tok.make_bounds()
    _WORKER.update(records=records, tok=tok, max_input=max_input)
    context = multiprocessing.get_context("fork")
    try:
        with context.Pool(count, initializer=quiet_tokenizers) as pool:
            yield from pool.imap(_evaluate_inherited, spans)
    finally:
        _WORKER.clear()


def _evaluate_inherited(span: range) -> tuple[pa.RecordBatch, WordMemory | None]:
    tok: ChatTokenizer = _WORKER["tok"]
    batch = _evaluate_span(_WORKER["records"], tok, _WORKER["max_input"], span)
    return batch, tok.take_learned_words()


def _evaluate_span(
    records: Records, tok: ChatTokenizer, max_input: int, span: range
) -> pa.RecordBatch:
    """Rows of ``records[span]``: inputs one conversation at a time, then every target of
    the span in one batch."""
    rows: dict[int, Row] = {}
    fitting: list[tuple[Conversation, Choice]] = []
    rate = TokenRate()
    for index in span:
        record = records[index]  # parsed here, in the worker (see sharegpt.Records)
        parsed = parse_conversation(index, record)
        if isinstance(parsed, Reason):
            rows[index] = Row(index, source_id(index, record), parsed.value)
            continue
        outcome = choose(parsed, PrefixCounter(tok, rate), max_input)
        if isinstance(outcome, Row):
            rows[index] = outcome
        else:
            fitting.append((parsed, outcome))
    counts = _target_counts(tok, [c.messages[x.end][1] for c, x in fitting])
    for (conversation, choice), count in zip(fitting, counts, strict=True):
        span_of = records.span(conversation.index)
        rows[conversation.index] = with_target(conversation, choice, count, span_of)
    return pa.RecordBatch.from_pylist([rows[index].__dict__ for index in span], schema=SCHEMA)


def _target_counts(tok: ChatTokenizer, targets: list[str]) -> list[int]:
    """Exact counts only where a rule needs one: a blank target is empty whatever its count
    (0 stands in), and one proved to have at least two tokens is ``UNCOUNTED``."""
    counts = [0 if not t.strip() else UNCOUNTED for t in targets]
    needed = [i for i, t in enumerate(targets) if t.strip() and tok.target_at_least(t) < 2]
    for i, count in zip(needed, tok.count_texts([targets[i] for i in needed]), strict=True):
        counts[i] = count
    return counts

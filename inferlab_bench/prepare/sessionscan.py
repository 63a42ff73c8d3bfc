"""The tokenizer's side of ``sharegpt-multi-turn-v1``: every conversation's session on both
cores, then the exact per-turn counts of the chosen sessions.

The scan applies ``sessions.choose_session`` with the single-request machinery: one
``PrefixCounter`` per conversation (each message is tokenized once, however many turns'
histories contain it; bounds prove most inputs fit and most targets have two tokens
without encoding them), in forked workers that inherit the parsed-on-read records and the
loaded tokenizer (as ``table`` does). A row keeps the record's byte range, not its text.

The chosen sessions are then rendered and encoded turn by turn: turn k's input (the
history with the generation prompt) and turn k-1's full context (its input plus its reply,
rendered as an assistant message without the generation prompt); the reusable prefix is
the tokens they share from the start (``sessions.reusable_prefix``), so it is what the
chat template and tokenizer give, not an estimate.

The scan's rows are cached (``store_scan``: JSON, keyed by everything they depend on), so a
preparation with another seed or size reads them instead of scanning the file again.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.errors import TokenizerError
from inferlab_bench.prepare.cache import cache_home
from inferlab_bench.prepare.materialize import (
    Conversation,
    Reason,
    parse_conversation,
    source_id,
)
from inferlab_bench.prepare.sessions import (
    MATERIALIZATION_IDENTITY,
    Session,
    TargetCheck,
    choose_session,
    reusable_prefix,
    turn_input_end,
)
from inferlab_bench.prepare.sharegpt import Records
from inferlab_bench.prepare.tokens.counting import count_on_all_cores, quiet_tokenizers
from inferlab_bench.prepare.tokens.tokenize import ChatTokenizer, PrefixCounter, TokenRate
from inferlab_bench.progress import NULL_PROGRESS, ProgressSink

_CHUNK = 512


@dataclass(frozen=True)
class ScanRow:
    """One record's outcome: its session's length and byte range, or why it has none."""

    index: int
    source_id: str
    reason: str | None
    turns: int = 0
    record_start: int = -1
    record_stop: int = -1


SCAN_VERSION = 1
"""Bumped whenever a session rule or the scan file changes: older files are not read."""


def scan_key(
    dataset_sha256: str,
    tokenizer_fingerprint: str,
    max_input_tokens: int,
    fixed_output: int | None,
    template_kwargs: Mapping[str, Any],
) -> str:
    """Everything the scan's rows depend on, hashed (the fixed output length too: it decides
    whether a one-token target ends a session)."""
    facts = {
        "dataset_sha256": dataset_sha256,
        "tokenizer": tokenizer_fingerprint,
        "max_input_tokens": max_input_tokens,
        "fixed_output": fixed_output,
        "chat_template_kwargs": dict(template_kwargs),
        "materialization": MATERIALIZATION_IDENTITY,
        "scan_version": SCAN_VERSION,
    }
    return hashlib.sha256(orjson.dumps(facts, option=orjson.OPT_SORT_KEYS)).hexdigest()


def scan_path(key: str) -> Path:
    return cache_home() / "session-scans" / f"{key}.v{SCAN_VERSION}.json"


def load_scan(key: str) -> tuple[list[ScanRow], str] | None:
    """The cached rows and the source format they were read from, or None when absent or
    not exactly such a file (it is then scanned again)."""
    try:
        data = orjson.loads(scan_path(key).read_bytes())
        rows = [_row(raw) for raw in data["rows"]]
        source_format = data["source_format"]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    return (rows, source_format) if isinstance(source_format, str) else None


def _row(raw: Any) -> ScanRow:
    index, sid, reason, turns, start, stop = raw
    numbers = (index, turns, start, stop)
    if not all(type(n) is int for n in numbers) or not isinstance(sid, str):
        raise ValueError("not a scan row")
    if reason is not None and not isinstance(reason, str):
        raise ValueError("not a scan row")
    return ScanRow(index, sid, reason, turns, start, stop)


def store_scan(key: str, rows: list[ScanRow], source_format: str) -> None:
    """Written whole or not at all (``atomic``)."""
    data = {"source_format": source_format, "rows": [list(r.__dict__.values()) for r in rows]}
    write_bytes_atomic(scan_path(key), orjson.dumps(data))


def scan(
    records: Records,
    tok: ChatTokenizer,
    max_input: int,
    fixed_output: int | None,
    progress: ProgressSink = NULL_PROGRESS,
    workers: int | None = None,
) -> list[ScanRow]:
    """Rows for every record, in file order; structural rejects never reach the tokenizer."""
    spans = [range(i, min(i + _CHUNK, len(records))) for i in range(0, len(records), _CHUNK)]
    rows: list[ScanRow] = []
    progress.begin("tokenizing conversations (sessions)", len(records), unit="conversations")
    for chunk in _scan_all(records, spans, tok, max_input, fixed_output, workers):
        rows.extend(chunk)
        progress.advance(len(chunk))
    progress.end()
    return rows


_WORKER: dict[str, Any] = {}


def _scan_all(
    records: Records,
    spans: list[range],
    tok: ChatTokenizer,
    max_input: int,
    fixed_output: int | None,
    workers: int | None,
) -> Iterator[list[ScanRow]]:
    count = workers or min(len(os.sched_getaffinity(0)), 8)
    if count <= 1 or len(spans) <= 1:
        for span in spans:
            yield _scan_span(records, tok, max_input, fixed_output, span)
        return
    tok.ready()
    tok.make_bounds()
    _WORKER.update(records=records, tok=tok, max_input=max_input, fixed_output=fixed_output)
    context = multiprocessing.get_context("fork")
    try:
        with context.Pool(count, initializer=quiet_tokenizers) as pool:
            yield from pool.imap(_scan_inherited, spans)
    finally:
        _WORKER.clear()


def _scan_inherited(span: range) -> list[ScanRow]:
    w = _WORKER
    return _scan_span(w["records"], w["tok"], w["max_input"], w["fixed_output"], span)


def _scan_span(
    records: Records, tok: ChatTokenizer, max_input: int, fixed_output: int | None, span: range
) -> list[ScanRow]:
    rows = []
    rate = TokenRate()
    check = target_check(tok, fixed_output)
    for index in span:
        record = records[index]  # parsed here, in the worker (see sharegpt.Records)
        parsed = parse_conversation(index, record)
        if isinstance(parsed, Reason):
            rows.append(ScanRow(index, source_id(index, record), parsed.value))
            continue
        outcome = choose_session(parsed, PrefixCounter(tok, rate), check, max_input)
        if isinstance(outcome, Session):
            start, stop = records.span(index)
            rows.append(ScanRow(index, parsed.source_id, None, outcome.turns, start, stop))
        else:
            rows.append(ScanRow(index, parsed.source_id, outcome))
    return rows


def target_check(tok: ChatTokenizer, fixed_output: int | None) -> TargetCheck:
    """The token part of a target's checks (its text is known non-blank): at least one
    token, and at least two without a fixed output length; counted only when the lower
    bound does not prove it."""

    def check(target: str) -> Reason | None:
        needed = 1 if fixed_output is not None else 2
        if tok.target_at_least(target) >= needed:
            return None
        count = tok.count_texts([target])[0]
        if count == 0:
            return Reason.EMPTY_ASSISTANT_TARGET
        if count < needed:
            return Reason.TARGET_SHORTER_THAN_TWO_TOKENS
        return None

    return check


@dataclass(frozen=True)
class Turn:
    """One turn of a chosen session, every count exact."""

    session: int
    turn: int
    conversation: Conversation
    input_tokens: int
    reusable_prefix_tokens: int
    target_tokens: int

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.conversation.chat(turn_input_end(self.turn))

    @property
    def target(self) -> str:
        return self.conversation.messages[turn_input_end(self.turn)][1]

    @property
    def target_sha256(self) -> str:
        return hashlib.sha256(self.target.encode("utf-8")).hexdigest()


def count_turns(
    tok: ChatTokenizer,
    chosen: list[tuple[Conversation, int]],
    max_input: int,
    fixed_output: int | None,
) -> list[Turn]:
    """The turns of the chosen (conversation, turns) sessions in order, counted exactly:
    inputs and targets on every core, reusable prefixes by ``shared_prefixes``."""
    inputs, targets, pairs = [], [], []
    for conversation, turns in chosen:
        for k in range(turns):
            end = turn_input_end(k)
            inputs.append(tok.render(conversation.chat(end)))
            if k:  # the previous turn's input and reply, as the server holds them
                pairs.append((tok.render_context(conversation.chat(end - 1)), inputs[-1]))
            targets.append(conversation.messages[end][1])
    counts = count_on_all_cores(tok, inputs + targets)
    input_counts, target_counts = iter(counts[: len(inputs)]), iter(counts[len(inputs) :])
    shared_at = iter(shared_prefixes(tok, pairs))
    found = []
    for session, (conversation, turns) in enumerate(chosen):
        for k in range(turns):
            shared = next(shared_at) if k else 0
            turn = Turn(session, k, conversation, next(input_counts), shared, next(target_counts))
            _check(turn, max_input, fixed_output)
            found.append(turn)
    return found


def shared_prefixes(tok: ChatTokenizer, pairs: list[tuple[str, str]]) -> list[int]:
    """``reusable_prefix(ids(previous), ids(current))`` of each (previous, current) text
    pair, without encoding whole texts when the tokenizer's cut at added tokens is mirrored
    (``ChatTokenizer.pieces``): the identical leading pieces count as they are (segments
    counted once each, an added token as one), and only the first two pieces after them on
    each side are encoded to find where the ids part. When that cannot settle it (the ids
    agree to the end of what was encoded while both texts go on), or the cut is not
    mirrored, both whole texts are encoded."""
    plans: list[tuple[list[tuple[str, bool]], list[str], list[str], bool, bool] | None] = []
    for previous, current in pairs:
        a, b = tok.pieces(previous), tok.pieces(current)
        if a is None or b is None:
            plans.append(None)
            continue
        n = 0
        while n < len(a) and n < len(b) and a[n] == b[n]:
            n += 1
        rest_a, rest_b = [p for p, _ in a[n : n + 2]], [p for p, _ in b[n : n + 2]]
        plans.append((a[:n], rest_a, rest_b, len(a) > n + 2, len(b) > n + 2))
    leading = sorted({p for plan in plans if plan for p, added in plan[0] if not added})
    counted = dict(zip(leading, tok.count_texts(leading), strict=True))
    parts = sorted({p for plan in plans if plan for p in plan[1] + plan[2]})
    encoded = dict(zip(parts, tok.encode_ids(parts), strict=True))
    found: list[int | None] = []
    for plan in plans:
        if plan is None:
            found.append(None)
            continue
        lead, rest_a, rest_b, more_a, more_b = plan
        base = sum(1 if added else counted[p] for p, added in lead)
        ids_a = [i for p in rest_a for i in encoded[p]]
        ids_b = [i for p in rest_b for i in encoded[p]]
        shared = reusable_prefix(ids_a, ids_b)
        settled = (shared < len(ids_a) or not more_a) and (shared < len(ids_b) or not more_b)
        found.append(base + shared if settled else None)
    unsettled = [i for i, n in enumerate(found) if n is None]
    whole = tok.encode_ids([text for i in unsettled for text in pairs[i]])
    for j, i in enumerate(unsettled):
        found[i] = reusable_prefix(whole[2 * j], whole[2 * j + 1])
    return [n for n in found if n is not None]


def _check(turn: Turn, max_input: int, fixed_output: int | None) -> None:
    """The scan proved every turn fits and every target long enough; the exact counts must
    agree, else a bound (or this module) is wrong and nothing is frozen."""
    short = turn.target_tokens < (1 if fixed_output is not None else 2)
    if turn.input_tokens > max_input or short:
        raise TokenizerError(
            f"record {turn.conversation.index} turn {turn.turn}: exact counts (input "
            f"{turn.input_tokens} of at most {max_input}, target {turn.target_tokens}) "
            "contradict the scan that admitted it; this is a bug in "
            "inferlab_bench/prepare/sessionscan.py or prepare/tokens/bounds.py"
        )

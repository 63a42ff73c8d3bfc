"""A conversation case in the case stage: which sessions it replays, that AIPerf replayed them
whole and sent each turn's frozen messages, and the per-turn document (sessions.json).

``request_count`` and ``warmup_request_count`` count sessions here: the case replays
sessions ``w..w+n-1`` of the population after warmup sessions ``0..w-1``, each with all its
turns. AIPerf's records are keyed per turn (``session#tN``) before the validity checks, so
that token reconciliation and the cold-start judgement see one entry per request.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from inferlab_bench import metric_tags as tags
from inferlab_bench.case import conversation, turns
from inferlab_bench.case.prefix import prefix_bounds
from inferlab_bench.case.records import CaseRecords, RecordColumns
from inferlab_bench.errors import PopulationError, RecordsError
from inferlab_bench.layout import evidence_path
from inferlab_bench.protocol import BenchClientRequest
from inferlab_bench.validity.cache import COLD_WAVE
from inferlab_bench.validity.inputs import turn_key
from inferlab_bench.validity.prefix_reuse import TurnObservation, reconcile_prefix_reuse

SESSIONS_FILE = "sessions.json"
SESSIONS_SCHEMA_VERSION = 1

SPACER_SESSION = "inferlab-unsent-spacer"
"""A session the trace holds between warmup and measured sessions, never sent: AIPerf 0.13's
rate loop draws the next session before it knows the phase's session count is reached
(``timing/strategies/request_rate.py``), so warmup consumes one session beyond its own and
profiling starts after it. Were it sent, the record check names it."""

PromptIds = Callable[[list[str]], list[list[int]]]
"""Turn keys -> their prompts' token ids, as the server renders them."""


@dataclass(frozen=True)
class Replay:
    """The sessions a conversation case replays, with its load and derived trace."""

    conversations: conversation.Conversations
    warmup: tuple[conversation.Session, ...]
    measured: tuple[conversation.Session, ...]
    load: conversation.SessionLoad
    trace: bytes
    trace_sessions: int
    """Sessions in the trace: warmup, the unsent spacer after them, measured."""


def replay_of(request: BenchClientRequest, load: conversation.SessionLoad | None) -> Replay | None:
    """The case's sessions when its population is a conversation population, else None."""
    population = request.population
    if population is None or not conversation.is_conversation_population(population.path):
        return None
    raw = [line for line in population.path.read_bytes().splitlines() if line.strip()]
    lines = [orjson.loads(line) for line in raw]
    evidence = evidence_path(population.path)
    facts = (
        [orjson.loads(line) for line in evidence.read_bytes().splitlines() if line.strip()]
        if evidence.is_file()
        else None
    )
    found = conversation.read_conversations(lines, facts)
    warmup_count, count = request.case.warmup_request_count, request.case.request_count
    load = load or conversation.SessionLoad()
    warmup = found.slice(0, warmup_count)
    measured = found.slice(warmup_count, count)
    spacer = (conversation.Session(SPACER_SESSION, warmup[0].lines),) if warmup else ()
    replayed = (*warmup, *spacer, *measured)
    trace = conversation.trace_lines(raw, replayed, load, request.definition.seed)
    return Replay(found, warmup, measured, load, trace, len(replayed))


def check_session_count(request: BenchClientRequest, data: bytes) -> None:
    """The conversation population holds the warmup and measured sessions the case needs."""
    ids: list[str] = []
    for line in data.splitlines():
        if line.strip():
            session = str(orjson.loads(line).get("session_id"))
            if not ids or ids[-1] != session:
                ids.append(session)
    needed = request.case.warmup_request_count + request.case.request_count
    if len(ids) < needed:
        raise PopulationError(
            f"population {request.population.path if request.population else ''}: "
            f"{len(ids)} sessions, the case needs {needed} (warmup "
            f"{request.case.warmup_request_count} + sessions {request.case.request_count})",
            hint="prepare more sessions or lower request_count / warmup_request_count",
        )


def check_warmup_complete(replay: Replay, warmup: RecordColumns) -> None:
    """Every warmup turn ran and none failed (warmup sessions end before profiling)."""
    expected = replay.conversations.turn_count(replay.warmup)
    if len(warmup) != expected:
        raise RecordsError(
            f"warmup: expected {expected} records ({len(replay.warmup)} sessions), "
            f"AIPerf wrote {len(warmup)}"
        )
    failed = int(np.sum(warmup.has_error | warmup.was_cancelled))
    if failed:
        raise RecordsError(
            f"warmup: {failed} of {expected} turns failed or were cancelled",
            hint="the server is not ready; warmup must complete before measuring",
        )


def check_records(replay: Replay, records: CaseRecords, raw_path: Path) -> None:
    """Each phase replayed exactly its sessions' turns, and every turn sent its frozen messages
    (AIPerf appended none of the server's replies)."""
    for phase, sessions in (("warmup", replay.warmup), ("profiling", replay.measured)):
        columns = getattr(records, phase)
        expected = Counter((s.session_id, turn) for s in sessions for turn in range(len(s.lines)))
        found = Counter(_keys(columns))
        if found != expected:
            missing = sorted(expected - found)[:3]
            unexpected = sorted(found - expected)[:3]
            raise RecordsError(
                f"{phase}: records do not match sessions' turns (missing {missing}, "
                f"unexpected {unexpected})",
                hint="AIPerf did not replay the sessions whole and in order",
            )
    if raw_path.is_file():
        _check_sent_messages(replay, raw_path)


def _keys(columns: RecordColumns) -> list[tuple[str, int]]:
    turn_index = columns.turn_index
    if turn_index is None:
        raise RecordsError("records carry no metadata.turn_index")
    return [
        (str(cid), int(turn)) for cid, turn in zip(columns.conversation_id, turn_index, strict=True)
    ]


def _check_sent_messages(replay: Replay, raw_path: Path) -> None:
    """AIPerf's raw export: each request's payload messages equal the population turn's."""
    for number, line in enumerate(raw_path.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        entry = orjson.loads(line)
        meta = entry.get("metadata") or {}
        session, turn = meta.get("conversation_id"), meta.get("turn_index")
        sent = _sent_messages(entry)
        if session is None or turn is None or sent is None:
            continue
        expected = replay.conversations.turn_of(str(session), int(turn))
        if expected is None or sent != expected.messages:
            raise RecordsError(
                f"{raw_path}:{number}: {session} turn {turn} sent {len(sent)} messages that are "
                "not the population's frozen turn",
                hint="AIPerf must replay the messages as written (message_array_with_responses)",
            )


def _sent_messages(entry: dict[str, Any]) -> list[Any] | None:
    payload = entry.get("payload") or (entry.get("request") or {}).get("payload")
    if isinstance(payload, str):
        payload = orjson.loads(payload)
    if not isinstance(payload, dict):
        return None
    messages = payload.get("messages")
    return messages if isinstance(messages, list) else None


def turn_keyed(records: CaseRecords) -> CaseRecords:
    """The records with each conversation id made the turn's key (``session#tN``)."""
    return CaseRecords(warmup=_keyed(records.warmup), profiling=_keyed(records.profiling))


def _keyed(columns: RecordColumns) -> RecordColumns:
    keys: list[str | None] = [turn_key(s, t) for s, t in _keys(columns)] if len(columns) else []
    return dataclasses.replace(columns, conversation_id=keys)


def turn_keyed_lines(
    replay: Replay, lines: list[dict[str, Any]] | None
) -> list[dict[str, Any]] | None:
    """The population lines with each ``session_id`` made its turn's key."""
    if lines is None:
        return None
    keyed = []
    for line, turn in zip(lines, replay.conversations.turns, strict=True):
        keyed.append({**line, "session_id": turn_key(turn.session_id, turn.turn)})
    return keyed


def sessions_document(
    replay: Replay,
    profiling: RecordColumns,
    *,
    cold_start_expected: bool,
    prompts: PromptIds,
) -> dict[str, Any]:
    """sessions.json: the replay's facts, per-turn figures, and ``prefix_reuse_reconciled``."""
    turn_index = np.asarray(profiling.turn_index, dtype=np.int64)
    succeeded = ~(profiling.has_error | profiling.was_cancelled)
    cached = np.asarray(profiling.metric(tags.CACHED_PROMPT_TOKENS), dtype=np.float64)
    columns = turns.TurnColumns(
        turn=turn_index,
        succeeded=succeeded,
        ttft_ms=profiling.metric(tags.TTFT),
        itl_ms=profiling.metric(tags.ITL),
        e2e_ms=profiling.metric(tags.REQUEST_LATENCY),
        cached_tokens=cached,
    )
    observations = _observations(replay, profiling, prompts)
    reuse = reconcile_prefix_reuse(
        observations, replay.load.cache_block_tokens, cold_start_expected
    )
    load = replay.load
    return {
        "schema_version": SESSIONS_SCHEMA_VERSION,
        "materialization_identity": conversation.MATERIALIZATION_IDENTITY,
        "warmup_sessions": len(replay.warmup),
        "measured_sessions": len(replay.measured),
        "measured_turns": replay.conversations.turn_count(replay.measured),
        "think_time": {
            "kind": load.think_time,
            "ms": load.think_time_ms,
            "ratio": load.think_time_ratio,
        },
        "per_turn": turns.per_turn(columns),
        "prefix_reuse": reuse.model_dump(mode="json"),
    }


def _observations(
    replay: Replay, profiling: RecordColumns, prompts: PromptIds
) -> list[TurnObservation]:
    keys = _keys(profiling)
    facts = {(turn.session_id, turn.turn): turn for turn in replay.conversations.turns}
    shared = _first_turn_sharing(profiling, keys, prompts)
    out = []
    failed = profiling.has_error | profiling.was_cancelled
    for i, (session, turn) in enumerate(keys):
        fact = facts[(session, turn)]
        previous = facts.get((session, turn - 1))
        out.append(
            TurnObservation(
                session_id=session,
                turn=turn,
                succeeded=not bool(failed[i]),
                prompt_tokens=float(profiling.metric(tags.PROMPT_TOKENS)[i]),
                cached_tokens=float(profiling.metric(tags.CACHED_PROMPT_TOKENS)[i]),
                reusable_prefix_tokens=fact.reusable_prefix_tokens or 0,
                previous_input_tokens=(previous.input_tokens or 0) if previous else 0,
                shared_with_earlier=shared.get(i),
            )
        )
    return out


def _first_turn_sharing(
    profiling: RecordColumns, keys: list[tuple[str, int]], prompts: PromptIds
) -> dict[int, int]:
    """Per first turn among the earliest requests: the most its prompt shares with any
    prompt that started before it (the prefix it may legitimately find cached)."""
    order = [int(i) for i in np.argsort(profiling.start_ns, kind="stable")]
    firsts = [position for position, i in enumerate(order) if keys[i][1] == 0]
    if not firsts:
        return {}
    window = order[: min(firsts[-1] + 1, COLD_WAVE)]
    ids = prompts([turn_key(*keys[i]) for i in window])
    bounds = prefix_bounds(ids)
    return {i: bound for i, bound in zip(window, bounds, strict=True) if keys[i][1] == 0}

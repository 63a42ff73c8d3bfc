"""A conversation population replayed as sessions: which turns belong to which session, the
think time between turns, and the derived trace AIPerf reads (pure but for ``write_trace``).

A conversation population (materialization identity ``sharegpt-multi-turn-v1``) holds one
line per turn: every turn carries the session's whole history, the dataset's own assistant
replies included, and ends with the user turn; a session's turns are consecutive and share
its ``session_id``. The population file stays frozen. The case replays a slice of whole
sessions (warmup sessions first, then the measured ones, never shared) from a trace written
into the case folder: the same lines, in order, each later turn given AIPerf's ``delay``
(the think time before it is sent, in ms). AIPerf sends each turn's messages as they are
(its ``message_array_with_responses`` mode): the server's own replies are never appended.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import Field

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.errors import ConfigurationError, PopulationError
from inferlab_bench.protocol import BenchClientRequest, PositiveU32, WireModel

MATERIALIZATION_IDENTITY = "sharegpt-multi-turn-v1"
MANIFEST_FILE = "preparation-manifest.json"
TRACE_FILE = "conversation-trace.jsonl"
"""The derived trace in the case folder: the replayed sessions' turns with their delays."""

ThinkTime = Literal["fixed", "exponential"]


@dataclass(frozen=True)
class SessionLoad:
    """How sessions are replayed: the think time before each later turn, and the cache block.

    ``think_time_ms`` is the delay before every turn after the first (``fixed``) or its mean
    (``exponential``, drawn per turn from the case seed); ``think_time_ratio`` scales it (0.1
    compresses a 10 s think time to 1 s). Session concurrency or arrival rate is the case's
    load shape: ``concurrency_limited`` keeps that many sessions in flight.
    """

    think_time_ms: float = 0.0
    think_time_ratio: float = 1.0
    think_time: ThinkTime = "fixed"
    cache_block_tokens: int = 16
    """The server's prefix-cache block: a reusable prefix counts in whole blocks (1: exact,
    as llama.cpp's slot cache)."""

    def __post_init__(self) -> None:
        if self.think_time_ms < 0 or self.think_time_ratio < 0:
            raise ConfigurationError(
                "think time: expected think_time_ms >= 0 and think_time_ratio >= 0, found "
                f"{self.think_time_ms} and {self.think_time_ratio}"
            )
        if self.cache_block_tokens < 1:
            raise ConfigurationError(
                f"cache_block_tokens: expected >= 1, found {self.cache_block_tokens}"
            )

    def delays_ms(self, turns: int, seed: int) -> list[float]:
        """The delay before each of ``turns`` later turns, in ms (rounded to 0.001 ms)."""
        mean = self.think_time_ms * self.think_time_ratio
        if self.think_time == "fixed" or mean == 0:
            return [round(mean, 3)] * turns
        rng = random.Random(seed)
        return [round(rng.expovariate(1.0 / mean), 3) for _ in range(turns)]


SESSIONS_FIELD = "inferlab_sessions"
"""The JSON case request's field carrying the session load (our extension of v6)."""


class SessionLoadInput(WireModel):
    """The session load in a JSON case request, as ``SessionLoad`` (the same defaults)."""

    think_time_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    think_time_ratio: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    think_time: ThinkTime = "fixed"
    cache_block_tokens: PositiveU32 = 16

    def load(self) -> SessionLoad:
        return SessionLoad(
            think_time_ms=self.think_time_ms,
            think_time_ratio=self.think_time_ratio,
            think_time=self.think_time,
            cache_block_tokens=self.cache_block_tokens,
        )


class SessionCaseRequest(BenchClientRequest):
    """A v6 ``BenchClientRequest`` plus our optional ``inferlab_sessions`` (the `case`
    command's request): every v6 field as v6 has it, unknown fields still refused. Without
    ``inferlab_sessions`` it is exactly a v6 request; with it, the population must be a
    conversation population."""

    inferlab_sessions: SessionLoadInput | None = None

    def session_load(self) -> SessionLoad | None:
        """The load asked for (None: the defaults); ConfigurationError when it is given
        for a population that holds single requests."""
        if self.inferlab_sessions is None:
            return None
        population = self.population
        if population is None or not is_conversation_population(population.path):
            raise ConfigurationError(
                f"{SESSIONS_FIELD}: expected a conversation population "
                f"({MATERIALIZATION_IDENTITY}), found "
                + ("no population" if population is None else f"{population.path}"),
                hint=f"drop {SESSIONS_FIELD} for a single-request population",
            )
        return self.inferlab_sessions.load()


@dataclass(frozen=True)
class Session:
    """One session of the population: its id and the line numbers of its turns, in order."""

    session_id: str
    lines: tuple[int, ...]


@dataclass(frozen=True)
class Turn:
    """One turn's facts from the population and its evidence."""

    session_id: str
    turn: int
    messages: list[dict[str, Any]]
    input_tokens: int | None
    reusable_prefix_tokens: int | None


@dataclass(frozen=True)
class Conversations:
    """The population's sessions and turns, in file order."""

    sessions: tuple[Session, ...]
    turns: tuple[Turn, ...]

    def slice(self, first: int, count: int) -> tuple[Session, ...]:
        return self.sessions[first : first + count]

    def turn_count(self, sessions: Sequence[Session]) -> int:
        return sum(len(session.lines) for session in sessions)

    @functools.cached_property
    def _by_id(self) -> dict[str, Session]:
        return {session.session_id: session for session in self.sessions}

    def turn_of(self, session_id: str, turn: int) -> Turn | None:
        """The population's turn ``turn`` of session ``session_id`` (None: no such turn)."""
        session = self._by_id.get(session_id)
        if session is None or not 0 <= turn < len(session.lines):
            return None
        return self.turns[session.lines[turn]]


def is_conversation_population(population: Path) -> bool:
    """True when the manifest beside the population names the multi-turn materialization."""
    manifest = population.with_name(MANIFEST_FILE)
    if not manifest.is_file():
        return False
    try:
        document = orjson.loads(manifest.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise PopulationError(f"{manifest}: unreadable manifest ({exc})") from exc
    return (
        isinstance(document, dict)
        and document.get("materialization_identity") == MATERIALIZATION_IDENTITY
    )


def session_turns(population: Path, sessions: int) -> int | None:
    """The turns of the population's first ``sessions`` sessions (what a case of that many
    sessions sends, warmup included); None when it is not a conversation population."""
    if not is_conversation_population(population):
        return None
    ids: list[str] = []
    turns = 0
    for line in population.read_bytes().splitlines():
        if not line.strip():
            continue
        session = str(orjson.loads(line).get("session_id"))
        if not ids or ids[-1] != session:
            if len(ids) == sessions:
                break
            ids.append(session)
        turns += 1
    return turns


def read_conversations(
    lines: Sequence[Mapping[str, Any]], evidence: Sequence[Mapping[str, Any]] | None
) -> Conversations:
    """Group the population's lines into sessions; PopulationError when a session's turns
    are not consecutive or the evidence does not match line for line."""
    if evidence is not None and len(evidence) != len(lines):
        raise PopulationError(
            f"population evidence: {len(evidence)} entries for {len(lines)} population lines",
            hint="population.jsonl and its evidence come from one prepare run",
        )
    sessions: list[Session] = []
    turns: list[Turn] = []
    seen: set[str] = set()
    for number, line in enumerate(lines):
        session_id = str(line.get("session_id"))
        messages = line.get("messages")
        if not isinstance(messages, list):
            raise PopulationError(f"population line {number + 1}: messages: expected a list")
        if sessions and sessions[-1].session_id == session_id:
            last = sessions[-1]
            sessions[-1] = Session(session_id, (*last.lines, number))
        elif session_id in seen:
            raise PopulationError(
                f"population line {number + 1}: session {session_id}: its turns are not "
                "consecutive",
                hint="a conversation population lists each session's turns together, in order",
            )
        else:
            seen.add(session_id)
            sessions.append(Session(session_id, (number,)))
        facts = evidence[number] if evidence is not None else {}
        turns.append(
            Turn(
                session_id=session_id,
                turn=len(sessions[-1].lines) - 1,
                messages=messages,
                input_tokens=_int_or_none(facts.get("input_tokens")),
                reusable_prefix_tokens=_int_or_none(facts.get("reusable_prefix_tokens")),
            )
        )
    return Conversations(tuple(sessions), tuple(turns))


def trace_lines(
    raw_lines: Sequence[bytes],
    sessions: Sequence[Session],
    load: SessionLoad,
    seed: int,
) -> bytes:
    """The derived trace: the sessions' lines in order, each later turn with its ``delay``."""
    later = sum(len(session.lines) - 1 for session in sessions)
    delays = iter(load.delays_ms(later, seed))
    out = bytearray()
    for session in sessions:
        for position, number in enumerate(session.lines):
            entry = orjson.loads(raw_lines[number])
            entry["session_id"] = session.session_id
            if position:
                entry["delay"] = next(delays)
            out += orjson.dumps(entry, option=orjson.OPT_SORT_KEYS) + b"\n"
    return bytes(out)


def write_trace(path: Path, data: bytes) -> Path:
    write_bytes_atomic(path, data)
    return path


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None

"""Conversation populations: sessions from consecutive lines, the derived trace's delays."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from inferlab_bench.case.conversation import (
    SessionLoad,
    is_conversation_population,
    read_conversations,
    trace_lines,
)
from inferlab_bench.errors import ConfigurationError, PopulationError


def line(session: str, turn: int) -> dict[str, object]:
    messages = [{"role": "user", "content": f"{session} {turn}"}]
    return {"messages": messages, "output_length": 4, "session_id": session}


LINES = [line("a", 0), line("a", 1), line("a", 2), line("b", 0), line("b", 1)]
EVIDENCE = [
    {"input_tokens": 10 * (i + 1), "reusable_prefix_tokens": 5 * i, "turn": i}
    for i in (0, 1, 2, 0, 1)
]


def test_sessions_group_consecutive_turns() -> None:
    found = read_conversations(LINES, EVIDENCE)
    assert [(s.session_id, s.lines) for s in found.sessions] == [("a", (0, 1, 2)), ("b", (3, 4))]
    assert [t.turn for t in found.turns] == [0, 1, 2, 0, 1]
    assert found.turn_of("b", 1) is found.turns[4]


def test_a_session_split_apart_is_refused() -> None:
    with pytest.raises(PopulationError, match="session a: its turns are not consecutive"):
        read_conversations([line("a", 0), line("b", 0), line("a", 1)], None)


def test_trace_gives_later_turns_the_think_time_and_keeps_the_rest() -> None:
    raw = [orjson.dumps(x) for x in LINES]
    found = read_conversations(LINES, None)
    trace = trace_lines(
        raw, found.sessions, SessionLoad(think_time_ms=2000, think_time_ratio=0.1), 1
    )
    entries = [orjson.loads(x) for x in trace.splitlines()]
    assert [e.get("delay") for e in entries] == [None, 200.0, 200.0, None, 200.0]
    assert [e["messages"] for e in entries] == [x["messages"] for x in LINES]


def test_exponential_think_time_is_seeded() -> None:
    load = SessionLoad(think_time_ms=100, think_time="exponential")
    assert load.delays_ms(5, 3) == load.delays_ms(5, 3) != load.delays_ms(5, 4)
    assert all(d > 0 for d in load.delays_ms(50, 3))


def test_bad_think_time_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="think_time_ms >= 0"):
        SessionLoad(think_time_ms=-1)


def test_manifest_names_the_conversation_population(tmp_path: Path) -> None:
    population = tmp_path / "population.jsonl"
    population.write_bytes(b"")
    assert not is_conversation_population(population)
    manifest = tmp_path / "preparation-manifest.json"
    manifest.write_bytes(b'{"materialization_identity": "sharegpt-multi-turn-v1"}')
    assert is_conversation_population(population)
    manifest.write_bytes(b'{"materialization_identity": "sharegpt-single-request-v1"}')
    assert not is_conversation_population(population)


def test_a_case_needing_more_sessions_than_the_population_holds_fails_clearly(
    tmp_path: Path,
) -> None:
    from inferlab_bench.case.stage import run_case
    from inferlab_bench.protocol import ClientStatus
    from tests.case.support import make_request, write_conversations

    population = write_conversations(tmp_path / "population.jsonl", [[4, 4]] * 3, words=8)
    request = make_request(
        port=9, artifact_dir=tmp_path / "case", population=population, request_count=3, warmup=1
    )
    result = run_case(request)
    assert result.status is ClientStatus.FAILED
    assert result.error is not None and result.error.startswith(
        f"population {population['path']}: 3 sessions, the case needs 4 (warmup 1 + sessions 3)"
    )

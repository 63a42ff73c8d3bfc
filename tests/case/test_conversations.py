"""Conversation cases end to end: real AIPerf replays sessions against the simulator, whose
prefix cache (on, off, too small) is the ground truth the reuse verdict is held to.

Each simulator runs one module-scoped case (AIPerf costs seconds); the tests read them.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from inferlab_bench.case.conversation import SessionLoad
from inferlab_bench.case.records import read_records
from inferlab_bench.case.sessions import check_records, replay_of
from inferlab_bench.case.stage import CaseOptions, run_case
from inferlab_bench.errors import RecordsError
from inferlab_bench.protocol import BenchClientRequest, BenchClientResult, ClientStatus
from inferlab_bench.report.sessions import read_sessions, sessions_lines
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR, make_request, write_conversations

pytestmark = pytest.mark.slow

SESSIONS = [[4, 4, 4]] * 6
WARMUP, MEASURED, TURNS = 1, 4, 3
THINK_MS = 60.0
PER_TOKEN_MS = 1.0
LATENCY = LatencyConfig(
    prefill_base_ms=5.0,
    prefill_ms_per_token=PER_TOKEN_MS,
    decode_base_ms=5.0,
    decode_ms_per_seq=0.2,
)
SMALL_CACHE_BLOCKS = 20
"""Two sessions' histories (up to 23 blocks each) cannot both stay in 20 blocks."""


@dataclass(frozen=True)
class Ran:
    request: BenchClientRequest
    result: BenchClientResult
    truth: list[dict[str, Any]]

    @property
    def root(self) -> Path:
        return self.request.artifact_dir

    def sessions(self) -> dict[str, Any]:
        document: dict[str, Any] = orjson.loads((self.root / "sessions.json").read_bytes())
        return document

    def reuse(self) -> dict[str, Any]:
        reuse: dict[str, Any] = self.sessions()["prefix_reuse"]
        return reuse


@pytest.fixture(scope="module")
def population(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return write_conversations(tmp_path_factory.mktemp("conv") / "population.jsonl", SESSIONS)


def _run(
    capacity: int, population: dict[str, Any], tmp: Path, load: dict[str, Any] | None = None
) -> Ran:
    config = SimulatorConfig(
        model="sim-model",
        tokenizer=TOKENIZER_DIR,
        cache_capacity_blocks=capacity,
        latency=LATENCY,
    )
    with running_simulator(config) as sim:
        request = make_request(
            port=sim.port,
            artifact_dir=tmp,
            population=population,
            request_count=MEASURED,
            warmup=WARMUP if load is None else 0,
            reset_prefix_cache=True,
            load_shape=load,
        )
        options = CaseOptions(echo=io.StringIO(), sessions=SessionLoad(think_time_ms=THINK_MS))
        result = run_case(request, options)
        return Ran(request, result, sim.ground_truth())


@pytest.fixture(scope="module")
def cache_on(population: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Ran:
    return _run(65536, population, tmp_path_factory.mktemp("on"))


@pytest.fixture(scope="module")
def cache_off(population: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Ran:
    return _run(0, population, tmp_path_factory.mktemp("off"))


@pytest.fixture(scope="module")
def cache_small(population: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Ran:
    return _run(SMALL_CACHE_BLOCKS, population, tmp_path_factory.mktemp("small"))


@pytest.fixture(scope="module")
def at_a_rate(population: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Ran:
    load = {"kind": "request_rate_limited", "request_rate": 20.0}
    return _run(65536, population, tmp_path_factory.mktemp("rate"), load)


def test_whole_sessions_replayed_warmup_disjoint(cache_on: Ran) -> None:
    assert cache_on.result.status is ClientStatus.SUCCEEDED, cache_on.result.error
    assert cache_on.result.completed_requests == MEASURED * TURNS
    records = read_records(cache_on.root / "aiperf" / "profile.jsonl")
    warm = set(zip(records.warmup.conversation_id, records.warmup.turn_index, strict=True))
    measured = set(
        zip(records.profiling.conversation_id, records.profiling.turn_index, strict=True)
    )
    assert warm == {("inferlab-00000000", t) for t in range(TURNS)}
    assert measured == {
        (f"inferlab-{s:08d}", t) for s in range(WARMUP, WARMUP + MEASURED) for t in range(TURNS)
    }
    config = orjson.loads((cache_on.root / "aiperf-config.json").read_bytes())["benchmark"]
    assert config["endpoint"]["connectionReuse"] == "sticky-user-sessions"
    assert config["profiling"]["sessions"] == MEASURED and config["warmup"]["sessions"] == WARMUP


def test_each_turn_sent_the_frozen_messages(cache_on: Ran, population: dict[str, Any]) -> None:
    lines = [orjson.loads(line) for line in Path(population["path"]).read_bytes().splitlines()]
    frozen = {(line["session_id"], len(line["messages"]) // 2): line["messages"] for line in lines}
    raw = (cache_on.root / "aiperf" / "profile_raw.jsonl").read_bytes().splitlines()
    sent = [orjson.loads(line) for line in raw]
    assert len(sent) == (WARMUP + MEASURED) * TURNS
    for entry in sent:
        meta = entry["metadata"]
        assert entry["payload"]["messages"] == frozen[(meta["conversation_id"], meta["turn_index"])]


def test_think_time_separates_turns(cache_on: Ran) -> None:
    records = read_records(cache_on.root / "aiperf" / "profile.jsonl").profiling
    by_session: dict[str, list[tuple[int, int, int]]] = {}
    for cid, turn, start, end in zip(
        records.conversation_id,
        records.turn_index,
        records.start_ns,
        records.end_ns,
        strict=True,
    ):
        by_session.setdefault(str(cid), []).append((int(turn), int(start), int(end)))
    gaps = []
    for turns in by_session.values():
        turns.sort()
        gaps += [(b[1] - a[2]) / 1e6 for a, b in zip(turns, turns[1:], strict=False)]
    assert len(gaps) == MEASURED * (TURNS - 1)
    assert min(gaps) >= THINK_MS - 1.0, gaps


def test_cached_tokens_match_the_simulators_ground_truth(cache_on: Ran) -> None:
    records = read_records(cache_on.root / "aiperf" / "profile.jsonl").profiling
    truth = {e["x_request_id"]: e for e in cache_on.truth if e["kind"] == "request"}
    reported = records.metric("usage_prompt_cache_read_tokens")
    for request_id, turn, cached in zip(
        records.x_request_id, records.turn_index, reported, strict=True
    ):
        assert truth[request_id]["cached_tokens"] == cached
        assert (cached > 0) == (turn > 0)


def test_reuse_passes_with_the_cache_on(cache_on: Ran) -> None:
    reuse = cache_on.reuse()
    assert reuse["prefix_reuse_reconciled"] == "pass", reuse["reason"]
    assert reuse["later_turns_hit"] == reuse["later_turns_expected_to_hit"] == MEASURED * 2
    assert reuse["cached_tokens_later"] == reuse["expected_cached_tokens"] > 0
    assert reuse["cached_tokens_first"] == 0


def test_later_turns_ttft_falls_as_the_cache_model_says(cache_on: Ran, cache_off: Ran) -> None:
    on = {row["turn"]: row for row in cache_on.sessions()["per_turn"]["by_turn"]}
    off = {row["turn"]: row for row in cache_off.sessions()["per_turn"]["by_turn"]}
    for turn in range(1, TURNS):
        saved_ms = on[turn]["mean_cached_tokens"] * PER_TOKEN_MS  # the model's prefill saving
        gained = off[turn]["ttft_ms"]["p50"] - on[turn]["ttft_ms"]["p50"]
        # Half the modeled saving: scheduling noise on a loaded 2-core host stays well below.
        assert gained >= saved_ms / 2, (turn, gained, saved_ms)
    assert off[0]["mean_cached_tokens"] == on[0]["mean_cached_tokens"] == 0


def test_reuse_fails_naming_no_caching_with_the_cache_off(cache_off: Ran) -> None:
    assert cache_off.result.status is ClientStatus.SUCCEEDED, cache_off.result.error
    reuse = cache_off.reuse()
    assert reuse["prefix_reuse_reconciled"] == "fail"
    assert reuse["cause"] == "no_prefix_caching"
    assert reuse["reason"].startswith("no prefix caching: none of the 8 later turns")


def test_reuse_fails_naming_eviction_with_a_small_cache(cache_small: Ran) -> None:
    reuse = cache_small.reuse()
    assert reuse["prefix_reuse_reconciled"] == "fail"
    assert reuse["cause"] == "evicted"
    assert 0 < reuse["later_turns_hit"] < reuse["later_turns_expected_to_hit"]
    truth_hits = [e["cached_tokens"] for e in cache_small.truth if e["kind"] == "request"]
    assert 0 in truth_hits[WARMUP * TURNS :]  # the simulator did evict a measured history


def test_report_prints_the_per_turn_table_and_the_verdict(cache_small: Ran) -> None:
    lines = sessions_lines(read_sessions(cache_small.root) or {})
    assert lines[0].startswith("sessions: 4 measured (12 turns), 1 warmup; think time fixed 60.0")
    assert lines[1].split()[:4] == ["turn", "n", "TTFT", "p50"]
    assert [line.split()[:2] for line in lines[2:7]] == [
        ["first", "4"],
        ["later", "8"],
        ["0", "4"],
        ["1", "4"],
        ["2", "4"],
    ]
    assert lines[-1].startswith("prefix_reuse_reconciled: fail (block 16 tokens): evicted: ")


def test_a_turn_sent_with_other_messages_is_refused(cache_on: Ran, tmp_path: Path) -> None:
    raw = (cache_on.root / "aiperf" / "profile_raw.jsonl").read_bytes().splitlines()
    entry = orjson.loads(raw[-1])
    entry["payload"]["messages"].append({"role": "assistant", "content": "the server's reply"})
    tampered = tmp_path / "profile_raw.jsonl"
    tampered.write_bytes(b"\n".join([*raw[:-1], orjson.dumps(entry)]) + b"\n")
    replay = replay_of(cache_on.request, SessionLoad(think_time_ms=THINK_MS))
    assert replay is not None
    records = read_records(cache_on.root / "aiperf" / "profile.jsonl")
    check_records(replay, records, cache_on.root / "aiperf" / "profile_raw.jsonl")  # as sent
    with pytest.raises(RecordsError, match=r"profile_raw.jsonl:\d+: inferlab-\d+ turn \d sent"):
        check_records(replay, records, tampered)


def test_a_rate_load_replays_whole_sessions_and_judges_every_turn(at_a_rate: Ran) -> None:
    assert at_a_rate.result.status is ClientStatus.SUCCEEDED, at_a_rate.result.error
    assert at_a_rate.result.completed_requests == MEASURED * TURNS
    config = orjson.loads((at_a_rate.root / "aiperf-config.json").read_bytes())["benchmark"]
    assert config["profiling"]["type"] == "poisson" and config["profiling"]["sessions"] == MEASURED
    validity = orjson.loads((at_a_rate.root / "validity.json").read_bytes())
    # Every turn starts before the first can end at a rate: each is judged against the
    # prompts sent before it, its own session's earlier turns included.
    assert validity["cache"]["cold_start"]["checked_requests"] == MEASURED * TURNS
    assert validity["verdicts"]["cache_cold"] == "pass"
    assert at_a_rate.reuse()["prefix_reuse_reconciled"] == "pass"

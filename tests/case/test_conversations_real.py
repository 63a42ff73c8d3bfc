"""Conversations end to end through the command line, on real text: `prepare --sessions` on the
61-conversation real ShareGPT sample (Qwen's tokenizer and chat template), then `run` of that
population against the simulator with its prefix cache on and off, then the JSON `case`
command carrying our session-load extension (``inferlab_sessions``).

The population's reusable prefix is counted with the real template (Qwen3 drops the think
block of earlier replies, so a later turn shares exactly the previous turn's input); the
case's expectation is that, bounded by the prompt less one token and rounded down to the
block; the simulator's ground truth is what its block cache served. All three must agree turn
by turn, or the verdict and the population disagree about what reuse means.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from inferlab_bench.case.conversation import session_turns
from inferlab_bench.case.records import read_records
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR
from tests.prepare.conftest import REAL_SAMPLE

pytestmark = pytest.mark.slow

SESSIONS, WARMUP, CONCURRENCY = 4, 1, 2
THINK_MS = 20.0
JSON_THINK_MS = 50.0
JSON_BLOCK = 32
BLOCK = 16
LATENCY = LatencyConfig(
    prefill_base_ms=5.0, prefill_ms_per_token=0.2, decode_base_ms=2.0, decode_ms_per_seq=0.1
)


def _cli(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inferlab_bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@dataclass(frozen=True)
class Ran:
    directory: Path
    stdout: str
    stderr: str
    truth: list[dict[str, Any]]
    json_case: Path | None = None
    """The JSON `case` command's folder (cache on only)."""

    def sessions(self, directory: Path | None = None) -> dict[str, Any]:
        document: dict[str, Any] = orjson.loads(
            ((directory or self.directory) / "sessions.json").read_bytes()
        )
        return document


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    cache = tmp_path_factory.mktemp("xdg")
    return {**os.environ, "XDG_CACHE_HOME": str(cache)}


@pytest.fixture(scope="module")
def population(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Path:
    out = tmp_path_factory.mktemp("pop") / "out"
    done = _cli(
        *("prepare", "--model", TOKENIZER_DIR, "--dataset", str(REAL_SAMPLE)),
        *("--entries", str(WARMUP + SESSIONS + 1), "--max-input-tokens", "2048"),
        *("--sessions", "--out", str(out)),
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return out / "population.jsonl"


def _run(capacity: int, population: Path, tmp: Path, env: dict[str, str]) -> Ran:
    config = SimulatorConfig(
        model="sim-model", tokenizer=TOKENIZER_DIR, cache_capacity_blocks=capacity, latency=LATENCY
    )
    with running_simulator(config) as sim:
        done = _cli(
            *("run", "--url", sim.base_url, "--model", "sim-model", "--tokenizer", TOKENIZER_DIR),
            *("--population", str(population), "--requests", str(SESSIONS)),
            *("--warmup", str(WARMUP), "--concurrency", str(CONCURRENCY)),
            *("--think-time-ms", str(THINK_MS), "--reset-prefix-cache", "vllm"),
            *("--out", str(tmp / "run")),
            env=env,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        json_case = _json_case(tmp / "run", tmp, env) if capacity else None
        return Ran(tmp / "run", done.stdout, done.stderr, sim.ground_truth(), json_case)


def _json_case(run: Path, tmp: Path, env: dict[str, str]) -> Path:
    """The run's own v6 request, sent to the `case` command with a session load of ours."""
    request = json.loads((run / "request.json").read_text())
    request["artifact_dir"] = str(tmp / "json-case")
    (tmp / "json-case").mkdir()
    request["inferlab_sessions"] = {
        "think_time_ms": JSON_THINK_MS,
        "cache_block_tokens": JSON_BLOCK,
    }
    (tmp / "case.json").write_text(json.dumps(request))
    done = _cli(
        *("case", "--input", str(tmp / "case.json"), "--output", str(tmp / "case-result.json")),
        *("--prefix-cache-reset", "vllm"),
        env=env,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp / "case-result.json").read_text())
    assert result["status"] == "succeeded", result["error"]
    return tmp / "json-case"


@pytest.fixture(scope="module")
def cache_on(
    population: Path, tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]
) -> Ran:
    return _run(65536, population, tmp_path_factory.mktemp("on"), env)


@pytest.fixture(scope="module")
def cache_off(
    population: Path, tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]
) -> Ran:
    return _run(0, population, tmp_path_factory.mktemp("off"), env)


def test_real_population_passes_with_the_cache_on_and_run_prints_it(cache_on: Ran) -> None:
    document = cache_on.sessions()
    reuse = document["prefix_reuse"]
    assert reuse["prefix_reuse_reconciled"] == "pass", reuse["reason"]
    assert reuse["later_turns_hit"] == reuse["later_turns_expected_to_hit"] > 0
    assert reuse["cached_tokens_later"] == reuse["expected_cached_tokens"] > 0
    assert reuse["cached_tokens_first"] == 0
    first, later = document["per_turn"]["first"], document["per_turn"]["later"]
    assert first["requests"] == SESSIONS and later["requests"] == document["measured_turns"] - 4
    assert later["mean_cached_tokens"] > 0 and first["mean_cached_tokens"] == 0
    assert first["ttft_ms"]["p50"] > 0 and later["ttft_ms"]["p50"] > 0
    # `run` prints the per-turn table and the verdict, as `report` does.
    assert f"sessions: {SESSIONS} measured (" in cache_on.stdout
    assert "prefix_reuse_reconciled: pass (block 16 tokens)" in cache_on.stdout


def test_population_case_and_server_agree_turn_by_turn_on_the_real_template(
    cache_on: Ran, population: Path
) -> None:
    evidence = _lines(population.with_name("population-evidence.jsonl"))
    facts = {(f["session_id"], f["turn"]): f for f in evidence}
    records = read_records(cache_on.directory / "aiperf" / "profile.jsonl").profiling
    truth = {e["x_request_id"]: e for e in cache_on.truth if e["kind"] == "request"}
    judged = 0
    for request_id, session, turn in zip(
        records.x_request_id, records.conversation_id, records.turn_index, strict=True
    ):
        served = truth[request_id]
        fact = facts[(str(session), int(turn))]
        assert served["prompt_tokens"] == fact["input_tokens"]
        if turn == 0:
            assert served["cached_tokens"] == 0
            continue
        previous = facts[(str(session), int(turn) - 1)]
        # Qwen3's template: a later turn shares exactly the previous turn's input.
        assert fact["reusable_prefix_tokens"] == previous["input_tokens"]
        bound = min(
            fact["reusable_prefix_tokens"], previous["input_tokens"], fact["input_tokens"] - 1
        )
        assert served["cached_tokens"] == bound // BLOCK * BLOCK, (session, turn)
        judged += 1
    assert judged == cache_on.sessions()["measured_turns"] - SESSIONS


def test_real_population_fails_naming_no_prefix_caching_with_the_cache_off(cache_off: Ran) -> None:
    reuse = cache_off.sessions()["prefix_reuse"]
    assert reuse["prefix_reuse_reconciled"] == "fail"
    assert reuse["cause"] == "no_prefix_caching"
    assert reuse["cached_tokens_later"] == 0 < reuse["expected_cached_tokens"]
    assert "prefix_reuse_reconciled: fail (block 16 tokens): no prefix caching" in cache_off.stdout


def test_the_json_case_carries_the_session_load(cache_on: Ran) -> None:
    assert cache_on.json_case is not None
    document = cache_on.sessions(cache_on.json_case)
    assert document["think_time"] == {"kind": "fixed", "ms": JSON_THINK_MS, "ratio": 1.0}
    reuse = document["prefix_reuse"]
    assert reuse["block_tokens"] == JSON_BLOCK and reuse["prefix_reuse_reconciled"] == "pass"
    trace = _lines(cache_on.json_case / "conversation-trace.jsonl")
    assert {line.get("delay") for line in trace} == {None, JSON_THINK_MS}
    records = read_records(cache_on.json_case / "aiperf" / "profile.jsonl").profiling
    ends: dict[tuple[str, int], tuple[int, int]] = {}
    for session, turn, start, end in zip(
        records.conversation_id, records.turn_index, records.start_ns, records.end_ns, strict=True
    ):
        ends[(str(session), int(turn))] = (int(start), int(end))
    gaps = [
        (start - ends[(session, turn - 1)][1]) / 1e6
        for (session, turn), (start, _) in ends.items()
        if turn > 0
    ]
    assert gaps and min(gaps) >= JSON_THINK_MS - 1.0, gaps


@pytest.mark.parametrize(
    ("sessions", "expected"),
    [
        ({"think_time_ms": -1}, "inferlab_sessions.think_time_ms: "),
        ({"think_time": "gamma"}, "inferlab_sessions.think_time: "),
        ({"cache_block_tokens": 0}, "inferlab_sessions.cache_block_tokens: "),
        ({"think_ms": 5}, "inferlab_sessions.think_ms: unknown field"),
    ],
)
def test_a_bad_session_load_fails_naming_the_field(
    cache_on: Ran, tmp_path: Path, env: dict[str, str], sessions: dict[str, Any], expected: str
) -> None:
    request = json.loads((cache_on.directory / "request.json").read_text())
    request["artifact_dir"] = str(tmp_path)
    request["inferlab_sessions"] = sessions
    (tmp_path / "in.json").write_text(json.dumps(request))
    done = _cli(
        "case", "--input", str(tmp_path / "in.json"), "--output", str(tmp_path / "o.json"), env=env
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr
    result = json.loads((tmp_path / "o.json").read_text())
    assert result["status"] == "failed"
    assert expected in result["error"], result["error"]


def test_a_session_load_for_single_requests_fails_naming_the_field(
    cache_on: Ran, tmp_path: Path, env: dict[str, str]
) -> None:
    request = json.loads((cache_on.directory / "request.json").read_text())
    single = tmp_path / "population.jsonl"
    single.write_text('{"messages": [{"role": "user", "content": "hi"}], "output_length": 4}\n')
    request["population"]["path"] = str(single)
    request["artifact_dir"] = str(tmp_path)
    request["inferlab_sessions"] = {"think_time_ms": 10}
    (tmp_path / "in.json").write_text(json.dumps(request))
    done = _cli(
        "case", "--input", str(tmp_path / "in.json"), "--output", str(tmp_path / "o.json"), env=env
    )
    assert done.returncode == 0
    result = json.loads((tmp_path / "o.json").read_text())
    assert result["status"] == "failed"
    assert result["error"].startswith("inferlab_sessions: expected a conversation population")


def test_progress_counts_turns(cache_on: Ran, population: Path, tmp_path: Path) -> None:
    evidence = _lines(population.with_name("population-evidence.jsonl"))
    sent = [f for f in evidence if int(f["session_id"].rsplit("-", 1)[1]) < WARMUP + SESSIONS]
    assert session_turns(population, WARMUP + SESSIONS) == len(sent) > WARMUP + SESSIONS
    single = tmp_path / "population.jsonl"  # no conversation manifest beside it
    single.write_bytes(population.read_bytes())
    assert session_turns(single, 2) is None
    counts = re.findall(r"progress: (\d+)/(\d+) (\w+) done", cache_on.stderr)
    assert counts, cache_on.stderr
    assert {(planned, noun) for _, planned, noun in counts} == {(str(len(sent)), "turns")}

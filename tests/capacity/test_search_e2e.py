"""The capacity search end to end: real AIPerf probes against the simulator on 127.0.0.1.

The simulator's latency model makes the answer computable. It runs at most ``SLOTS``
sequences; each takes ``PREFILL_MS`` to its first token, then ``OUTPUT`` tokens ``ITL_MS``
apart, with no jitter. At concurrency <= SLOTS nothing queues and TTFT = PREFILL_MS (150 ms,
under the 200 ms bound). At SLOTS + 1 one request is always waiting: the engine runs in
lock-step rounds (every sequence is admitted and finishes together), so a waiter waits a
whole service time (TTFT >= 150 + 4 * 50 = 350 ms) and at least one request in five misses
the bound: attainment <= 0.8 < 0.95. The true capacity is SLOTS = 4.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator, Mapping
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import orjson
import pytest

from inferlab_bench.cli import main
from inferlab_bench.layout import evidence_path
from inferlab_bench.runs.demo import TOKENIZER_DIR
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
from tests.case.support import make_request, population_line
from tests.protocol.examples import prep_request
from tests.report.test_check import assert_consistent

SLOTS = 4
PREFILL_MS = 150.0
ITL_MS = 50.0
OUTPUT = 4
BOUND_MS = 200.0
REQUESTS = 24
WARMUP = 2

# A probe's budget covers AIPerf's start-up, which dwarfs its load (26 requests of 350 ms at
# c=3 take 3 s): on 2 cores from its config to its first request AIPerf took 14 s at load
# average 2 and 17 to 85 s at 15 to 18 (2026-12-07, 11 runs); with 60 s both probes at c=3
# ran out while AIPerf was still starting and the search exited 1. 150 s is that worst 85 s
# plus the load and AIPerf's stop, with half again to spare.
PROBE_BUDGET = 150
# Bounded: the search takes 4 probes (3, 6, 4, 5), each within its budget, plus at most two
# re-runs of invalid ones: 6 x 150 s. Quiet, the whole test took 40-80 s.
pytestmark = pytest.mark.timeout(6 * PROBE_BUDGET)


@pytest.fixture(scope="module")
def population(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The prepare stage's format and evidence, the tokenizer loaded once (not per line)."""
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("pop")
    (folder / "prepare-request.json").write_bytes(orjson.dumps(prep_request()))
    lines = [population_line(i, OUTPUT) for i in range(WARMUP + REQUESTS)]
    data = b"".join(line + b"\n" for line in lines)
    path = folder / "population.jsonl"
    path.write_bytes(data)
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR, local_files_only=True)
    evidence = []
    for line in lines:
        ids = tokenizer.apply_chat_template(
            orjson.loads(line)["messages"], add_generation_prompt=True, tokenize=True
        )
        ids = ids["input_ids"] if isinstance(ids, Mapping) else ids
        evidence.append(orjson.dumps({"input_tokens": len(ids)}) + b"\n")
    evidence_path(path).write_bytes(b"".join(evidence))
    return {
        "path": str(path),
        "sha256": hashlib.sha256(data).hexdigest(),
        "entries": len(lines),
        "tpot_applicable": True,
    }


@pytest.fixture(scope="module")
def slotted() -> Iterator[Any]:
    latency = LatencyConfig(
        prefill_base_ms=PREFILL_MS,
        prefill_ms_per_token=0.0,
        decode_base_ms=ITL_MS,
        decode_ms_per_seq=0.0,
        max_num_seqs=SLOTS,
    )
    config = SimulatorConfig(tokenizer=TOKENIZER_DIR, latency=latency)
    with running_simulator(config) as running:
        yield running


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_the_search_lands_on_the_known_capacity(
    slotted: Any, population: dict[str, Any], tmp_path: Path
) -> None:
    """smooth-isotonic over 3:6 probes 3 (pass), 6 (fail), then 4 and 5 inside the bracket;
    every probe warmed up and reset its cache after warmup, like a case."""
    code, out, err = cli(
        "capacity",
        *("--url", slotted.base_url, "--model", "sim-model", "--tokenizer", TOKENIZER_DIR),
        *("--population", population["path"], "--requests", str(REQUESTS)),
        *("--warmup", str(WARMUP), "--reset-prefix-cache", "vllm"),
        *("--slo-ttft-ms", str(BOUND_MS), "--attainment", "0.95"),
        *("--concurrency-range", "3:6", "--max-probes", "8", "--budget", str(PROBE_BUDGET)),
        *("--out", str(tmp_path), "--json"),
    )
    assert code == 0, (err, out[-2000:])  # the JSON says why (e.g. a probe's budget ran out)
    shown = json.loads(out)
    answer = shown["answer"]
    if answer["status"] == "client_limited":
        # A host too busy to drive c=3 (a CPU hog per core at load average 23: dispatch delay
        # p95 64-571 ms, bound 50) is the search's own honest answer: every probe it ran failed
        # load_generator_kept_up and none was counted. The capacity is checked when it can be.
        assert all(
            not p["counted"] and "load_generator_kept_up" in p["invalid_reason"]
            for p in shown["probes"]
        ), shown["probes"]
        assert answer["capacity"] is None and "--engine kube" in answer["message"]
        pytest.skip(f"this host could not drive the load: {answer['message']}")
    assert answer["status"] == "found", answer
    assert answer["capacity"] == SLOTS, shown["probes"]
    assert answer["lowest_failing"] == SLOTS + 1
    assert answer["interval"] == [SLOTS, SLOTS + 1]
    assert answer["first_breach"] == "ttft_ms"
    assert answer["attainment_at_capacity"] == 1.0
    assert answer["goodput_at_capacity"] > 0
    assert answer["confidence"]["planner"] == "smooth_isotonic"
    assert answer["confidence"]["convergence_reason"].startswith("smooth_isotonic")
    probes = shown["probes"]
    counted = [p for p in probes if p["counted"]]
    assert all(p["valid"] for p in counted)
    assert sorted(p["load"] for p in counted) == [3, 4, 5, 6]
    for p in counted:
        assert (p["load"] <= SLOTS) == p["slo_met"], p
    # On a busy machine a probe may fail validity (the client fell behind): it is not
    # counted, says nothing about the SLO, and the same load is run again next.
    for i, p in enumerate(probes):
        if not p["counted"]:
            assert not p["valid"] and p["slo_met"] is None
            assert probes[i + 1]["load"] == p["load"]
    document = json.loads((tmp_path / "capacity.json").read_text())
    assert document["schema_name"] == "inferlab-capacity-v1"
    for p in document["probes"]:
        if not p["counted"]:
            continue
        folder = tmp_path / p["directory"]
        validity = json.loads((folder / "validity.json").read_text())
        assert validity["verdicts"]["cache_cold"] == "pass"
        assert validity["verdicts"]["load_generator_kept_up"] == "pass"
    assert (tmp_path / "plots" / "capacity.png").stat().st_size > 0
    assert assert_consistent(tmp_path)["capacity_searches"] == 1  # report --check agrees


def test_a_client_that_falls_behind_gets_no_capacity(
    population: dict[str, Any], tmp_path: Path
) -> None:
    """A zero-latency server: the client's own send time dwarfs the TTFT, so every probe's
    load_generator_kept_up fails. The SLO is met by share, yet nothing is counted: the search
    stops without calling anything capacity (JSON mode, no re-run)."""
    with running_simulator(
        SimulatorConfig(tokenizer=TOKENIZER_DIR, latency=LatencyConfig.zero())
    ) as fast:
        case = make_request(
            port=fast.port,
            artifact_dir=tmp_path / "search",
            population=population,
            request_count=REQUESTS,
            slo={"ttft_ms": 1000.0, "minimum_good_request_ratio": 0.5},
            budget=PROBE_BUDGET,
        )
        request = {
            "schema_name": "inferlab-capacity-request-v1",
            "schema_version": 1,
            "case": json.loads(case.model_dump_json()),
            "search": {
                "axis": "concurrency",
                "low": 1,
                "high": 8,
                "criterion": {"kind": "attainment", "value": 0.95},
                "reruns": 0,  # the re-run is shown in test_search.py; here one probe suffices
            },
        }
        (tmp_path / "request.json").write_text(json.dumps(request))
        code, _, err = cli(
            "capacity-json",
            *("--input", str(tmp_path / "request.json")),
            *("--output", str(tmp_path / "result.json")),
        )
    assert code == 0, err
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "succeeded", result["error"]
    document = result["capacity"]
    answer = document["answer"]
    assert answer["status"] == "client_limited"
    assert answer["capacity"] is None and answer["interval"] is None
    assert answer["stopped_at_load"] == 1
    assert "--engine kube" in answer["message"]
    assert document["probes_run"] == 1 and document["probes_counted"] == 0
    for probe in document["probes"]:
        assert not probe["counted"] and probe["slo_met"] is None
        assert "load_generator_kept_up" in probe["invalid_reason"]
        assert all(m["met"] for m in probe["metrics"])  # a naive search would say "pass"
        assert (tmp_path / "search" / probe["directory"] / "result.json").is_file()
    assert document["planner"]["convergence_reason"] is None

"""Real AIPerf against the simulator: each property broken on purpose flips its verdict.

Four AIPerf runs (about 15 s each): a healthy concurrency case with a reset and an SLO,
the same case against a server with three faults (wrong prompt tokens, min_tokens
ignored, a reset that does nothing), a healthy poisson case, and a poisson rate far above
what two cores can send. Dispatch tolerances are loosened for a loaded machine; the
overload misses its rate by a factor of several, far outside any of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from inferlab_bench.case.records import read_records
from inferlab_bench.protocol import BenchLoadInput, ConcurrencyLimited, RequestRateLimited
from inferlab_bench.simulator import FaultConfig, LatencyConfig, SimulatorConfig, running_simulator
from inferlab_bench.validity import (
    CaseFacts,
    DispatchTolerances,
    Expectations,
    PhaseRecords,
    Tolerances,
    ValidityDocument,
    Verdict,
    assess,
    assess_case,
    population_sha256,
    summary_lines,
)
from inferlab_bench.validity.digests import ids_sha256
from tests.validity.aiperf_e2e import (
    phase_records,
    prewarm_and_reset,
    qwen_dir,
    run_aiperf,
    write_population,
)

pytestmark = pytest.mark.slow

REQUESTS = 24
SLOW_ENOUGH = LatencyConfig(
    prefill_base_ms=5, prefill_ms_per_token=0.05, decode_base_ms=20, decode_ms_per_seq=0.2
)
LOADED_MACHINE = Tolerances(
    dispatch=DispatchTolerances(max_dispatch_delay_p95_ms=250.0, min_held_concurrency_ratio=0.8)
)
CONCURRENCY = ConcurrencyLimited(kind="concurrency_limited", concurrency=4)


@dataclass(frozen=True)
class Population:
    path: Path
    data: bytes
    expected: Expectations


@dataclass(frozen=True)
class Run:
    records: PhaseRecords
    doc: ValidityDocument
    records_path: Path
    load: BenchLoadInput


@pytest.fixture(scope="module")
def population(tmp_path_factory: pytest.TempPathFactory) -> Population:
    path, data, expected = write_population(tmp_path_factory.mktemp("population"), REQUESTS)
    return Population(path, data, expected)


def run_case(
    directory: Path,
    population: Population,
    faults: FaultConfig,
    load: BenchLoadInput,
    profiling: dict[str, object],
    *,
    latency: LatencyConfig = SLOW_ENOUGH,
    reset: bool = False,
    slos: dict[str, float] | None = None,
) -> Run:
    config = SimulatorConfig(tokenizer=qwen_dir(), latency=latency, faults=faults)
    with running_simulator(config) as sim:
        if reset:
            prewarm_and_reset(sim.base_url, population.path)
        records_path = run_aiperf(directory, sim.base_url, population.path, profiling, slos)
    records = phase_records(records_path)
    facts = CaseFacts(
        load=load,
        expectations=population.expected,
        population_sha256=population_sha256(population.data),
        reset_requested=reset,
    )
    return Run(records, assess(records, None, facts, LOADED_MACHINE), records_path, load)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory, population: Population) -> Iterator[Run]:
    profiling = {"type": "concurrency", "concurrency": 4, "requests": REQUESTS}
    yield run_case(
        tmp_path_factory.mktemp("healthy"),
        population,
        FaultConfig(),
        CONCURRENCY,
        profiling,
        reset=True,
        slos={"request_latency": 60_000},
    )


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory, population: Population) -> Iterator[Run]:
    faults = FaultConfig(prompt_tokens_offset=7, ignore_min_tokens=True, reset_noop=True)
    profiling = {"type": "concurrency", "concurrency": 4, "requests": REQUESTS}
    yield run_case(
        tmp_path_factory.mktemp("faulty"), population, faults, CONCURRENCY, profiling, reset=True
    )


def poisson(rate: float) -> RequestRateLimited:
    return RequestRateLimited(kind="request_rate_limited", request_rate=rate)


def test_a_healthy_case_holds_every_verdict(healthy: Run) -> None:
    doc = healthy.doc
    assert doc.verdict is Verdict.PASS, "\n".join(summary_lines(doc))
    assert doc.failed() == []
    assert doc.dispatch.held_concurrency is not None and doc.dispatch.held_concurrency > 3.2
    assert doc.cache.cold_start is not None
    assert doc.cache.cold_start.first_request_cached_tokens == 0
    assert doc.prompt_tokens.compared == doc.output_tokens.compared == REQUESTS


def test_the_healthy_case_proves_which_work_it_sent(healthy: Run, population: Population) -> None:
    planned = sorted(population.expected.output_tokens)
    (sequence,) = healthy.doc.sequences
    assert sequence.set_sha256 == ids_sha256(planned)
    assert sequence.sequence_sha256 == ids_sha256(planned)  # sequential sampling, in order
    assert healthy.doc.population_sha256 == population_sha256(population.path.read_bytes())


def test_token_goodput_with_a_loose_slo_counts_every_planned_token(
    healthy: Run, population: Population
) -> None:
    goodput = healthy.doc.goodput
    outputs = sum(population.expected.output_tokens.values())
    inputs = sum(population.expected.input_tokens.values())
    assert goodput.good_requests == REQUESTS
    assert goodput.good_output_tokens == outputs
    assert goodput.good_total_tokens == outputs + inputs
    assert goodput.window_seconds is not None
    assert goodput.good_output_token_goodput == pytest.approx(outputs / goodput.window_seconds)


def test_a_server_reporting_wrong_prompt_tokens_fails_reconciliation(faulty: Run) -> None:
    tokens = faulty.doc.prompt_tokens
    assert tokens.verdict is Verdict.FAIL
    assert tokens.difference is not None
    assert (tokens.difference.minimum, tokens.difference.maximum) == (7.0, 7.0)


def test_a_server_ignoring_min_tokens_fails_output_fidelity(faulty: Run) -> None:
    outputs = faulty.doc.output_tokens
    assert outputs.verdict is Verdict.FAIL
    assert outputs.shorter == REQUESTS and outputs.longer == 0


def test_a_reset_that_clears_nothing_fails_cache_coldness(faulty: Run) -> None:
    cache = faulty.doc.cache
    assert cache.cache_cold is Verdict.FAIL
    assert cache.cold_start is not None
    assert cache.cold_start.first_request_cached_tokens > 0
    assert cache.phases[-1].read_ratio is not None and cache.phases[-1].read_ratio > 0.5


def test_server_faults_do_not_blame_the_load_generator(faulty: Run) -> None:
    assert faulty.doc.verdicts["load_generator_kept_up"] is Verdict.PASS
    assert set(faulty.doc.failed()) == {
        "prompt_tokens_reconciled",
        "output_lengths_honored",
        "cache_cold",
    }


def test_a_poisson_load_the_client_can_send_keeps_up(
    tmp_path: Path, population: Population
) -> None:
    profiling = {"type": "poisson", "rate": 12.0, "requests": REQUESTS}
    run = run_case(tmp_path, population, FaultConfig(), poisson(12.0), profiling)
    dispatch = run.doc.dispatch
    assert dispatch.load_generator_kept_up is Verdict.PASS, "\n".join(summary_lines(run.doc))
    assert run.doc.verdict is Verdict.PASS


def test_a_rate_far_above_what_two_cores_can_send_is_flagged(tmp_path: Path) -> None:
    path, data, expected = write_population(tmp_path, 300)
    big = Population(path, data, expected)
    profiling = {"type": "poisson", "rate": 5000.0, "requests": 300}
    run = run_case(
        tmp_path, big, FaultConfig(), poisson(5000.0), profiling, latency=LatencyConfig.zero()
    )
    dispatch = run.doc.dispatch
    checks = {c.name: c.verdict for c in dispatch.checks}
    assert dispatch.load_generator_kept_up is Verdict.FAIL
    assert checks["achieved_rate_relative_error"] is Verdict.FAIL
    assert dispatch.achieved_rate is not None and dispatch.achieved_rate < 0.5 * 5000.0
    assert run.doc.failed() == ["load_generator_kept_up"]


@pytest.mark.parametrize("name", ["healthy", "faulty"])
def test_the_case_adapter_agrees_on_the_case_stage_records(
    name: str, request: pytest.FixtureRequest, population: Population
) -> None:
    run: Run = request.getfixturevalue(name)
    doc = assess_case(
        read_records(run.records_path),
        run.load,
        expectations=population.expected,
        population_sha256=population_sha256(population.data),
        reset_requested=True,
        tolerances=LOADED_MACHINE,
    )
    for verdict in ("prompt_tokens_reconciled", "output_lengths_honored", "cache_cold"):
        assert doc.verdicts[verdict] is run.doc.verdicts[verdict]
    assert [s.sequence_sha256 for s in doc.sequences] == [
        s.sequence_sha256 for s in run.doc.sequences
    ]
    assert doc.dispatch.checks == run.doc.dispatch.checks

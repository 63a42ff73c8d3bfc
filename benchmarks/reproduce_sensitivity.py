"""The smallest slowdown ``reproduce`` calls ``slower``: publish one case (N trials) against the
simulator, then reproduce it (N trials) against simulators whose decode time is longer by each
given fraction, and print each verdict with its difference and interval.

Run: ``python benchmarks/reproduce_sensitivity.py [--trials 3] [--deltas 0,0.1,0.2,0.3]``
(needs the test extra for the Qwen2 tokenizer). Prints one JSON object per line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from inferlab_bench.publish.bundle import write_bundle
from inferlab_bench.publish.reproduce import ReproduceSettings, reproduce
from inferlab_bench.runs.demo import TOKENIZER_DIR
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
from tests.publish.support import prepare_population

METRICS = ("p50_tpot_ms", "p90_tpot_ms", "p50_request_latency_ms", "output_throughput")
BASE_DECODE_MS = 8.0


def simulator(decode_ms: float) -> SimulatorConfig:
    return SimulatorConfig(
        model="sim",
        tokenizer=TOKENIZER_DIR,
        reset_endpoints=("vllm",),
        latency=LatencyConfig(decode_base_ms=decode_ms),
    )


def publish(root: Path, trials: int, requests: int, concurrency: int) -> Path:
    from inferlab_bench.case.stage import CaseOptions
    from inferlab_bench.load import Load
    from inferlab_bench.protocol import BenchDatasetPreparationRequest, parse_request
    from inferlab_bench.runs.population import population_facts
    from inferlab_bench.runs.requests import CaseShape, Target, Workload, case_request
    from inferlab_bench.runs.trials import run_trials

    population = prepare_population(root / "pop", seed=0, entries=requests)
    prep = parse_request(
        BenchDatasetPreparationRequest, (root / "pop" / "prepare-request.json").read_bytes()
    )
    with running_simulator(simulator(BASE_DECODE_MS)) as sim:
        request = case_request(
            Target(sim.base_url, "sim", TOKENIZER_DIR),
            Workload(
                source=prep.request_source,  # type: ignore[arg-type]
                population=population_facts(population),
                reset_prefix_cache=True,
            ),
            CaseShape(Load.at_concurrency(concurrency).wire(), requests=requests),
            root / "published",
        )
        run_trials(request, CaseOptions(prefix_cache_reset="vllm"), trials)
    out = root / "published.tar.gz"
    write_bundle(root / "published", out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--deltas", default="0,0.05,0.1,0.2,0.3")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="inferlab-sensitivity-") as tmp:
        root = Path(tmp)
        bundle = publish(root, args.trials, args.requests, args.concurrency)
        for delta in (float(d) for d in args.deltas.split(",")):
            started = time.monotonic()
            with running_simulator(simulator(BASE_DECODE_MS * (1 + delta))) as sim:
                outcome = reproduce(
                    ReproduceSettings(
                        bundle,
                        sim.base_url,
                        "sim",
                        Path(TOKENIZER_DIR),
                        root / f"repro-{delta}",
                        trials=args.trials,
                    )
                )
            case = outcome.cases[0]
            row = {
                "decode_slower_by": delta,
                "trials": args.trials,
                "seconds": round(time.monotonic() - started, 1),
                "not_comparable": list(case.not_comparable),
            }
            for metric in METRICS:
                m = case.of(metric)
                if m is not None:
                    row[metric] = {
                        "verdict": m.verdict,
                        "relative": None if m.relative is None else round(m.relative, 4),
                        "ci": [m.ci_low, m.ci_high],
                    }
            print(json.dumps(row), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

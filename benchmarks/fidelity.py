"""Client-measured TTFT, ITL and end-to-end latency vs the simulator's ground truth.

For each load point a fresh simulator serves one real AIPerf run; every AIPerf record is
joined to the server's ground-truth record by X-Request-ID. Ground truth, per request:
TTFT = first token written - request arrival, ITL = (last token - first token) / (n - 1),
end-to-end = response finished - arrival. Printed: the relative error of the client's p50
and p99 against the ground truth's p50 and p99 over the same requests, and the dispatch
verdict ``load_generator_kept_up`` of the same run (a saturated client should fail it), and
the client's own mean send time (AIPerf's HTTP trace: blocked + connecting + sending), which
validity.json reports as a figure.

Client and server share this machine's cores, which no real deployment does: while AIPerf's
processes (worker, record processors, timing) are busy, the server's event loop waits for a
core before it reads a request, and the client's clock counts that wait as server time. So
every point runs in each placement, side by side: ``shared`` (every core, equal priority),
``server-first`` (AIPerf at nice +10, so the server's wake-up does not queue behind the
client; the client still competes with itself) and ``isolated`` (the server pinned to one
core, AIPerf to the others: the nearest one machine gets to two).

    python benchmarks/fidelity.py            # c 1, 8, 32, 64; poisson 5, 20, 60, 400; all
    python benchmarks/fidelity.py --quick    # fewer requests per point
    python benchmarks/fidelity.py --placement isolated --load c1 p60   # a subset
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from synthetic import write_population

from inferlab_bench.case.records import read_records
from inferlab_bench.protocol import BenchLoadInput, ConcurrencyLimited, RequestRateLimited
from inferlab_bench.runs.demo import TOKENIZER_DIR
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
from inferlab_bench.validity import CaseFacts, PhaseRecords, Verdict, assess
from inferlab_bench.validity.adapter import phase_records

# A model slow enough to look like a GPU (TTFT ~50 ms, ITL ~15-22 ms), 32 output tokens.
LATENCY = LatencyConfig(
    prefill_base_ms=40,
    prefill_ms_per_token=0.1,
    decode_base_ms=15,
    decode_ms_per_seq=0.1,
    max_num_seqs=64,
)
OUTPUT_TOKENS = 32
METRICS = (
    ("TTFT", "time_to_first_token"),
    ("ITL", "inter_token_latency"),
    ("E2E", "request_latency"),
)


@dataclass(frozen=True)
class Point:
    label: str
    key: str
    load: BenchLoadInput
    profiling: dict[str, Any]
    requests: int


@dataclass(frozen=True)
class Placement:
    """How the client shares the machine with the server."""

    nice: int = 0  # AIPerf's nice value
    server_cpus: frozenset[int] | None = None  # None: every core
    client_cpus: frozenset[int] | None = None

    def pin_server(self) -> None:
        """Pin this process, and so the simulator thread it starts next, to the server's cores."""
        os.sched_setaffinity(0, self.server_cpus or ALL_CPUS)

    def start_client(self) -> None:
        """Run in AIPerf's process before exec: its priority and cores."""
        os.nice(self.nice)
        os.sched_setaffinity(0, self.client_cpus or ALL_CPUS)


ALL_CPUS = frozenset(os.sched_getaffinity(0))
PLACEMENTS = {
    "shared": Placement(),
    "server-first": Placement(nice=10),
}
if len(ALL_CPUS) >= 2:
    # One core for the server, the rest for AIPerf: the nearest this machine gets to two hosts.
    _first = min(ALL_CPUS)
    PLACEMENTS["isolated"] = Placement(
        server_cpus=frozenset({_first}), client_cpus=ALL_CPUS - {_first}
    )


@dataclass(frozen=True)
class PointResult:
    point: Point
    placement: str
    errors: dict[str, tuple[float, float]]
    ground_truth_p50_ms: dict[str, float]
    kept_up: Verdict
    failed_checks: tuple[str, ...]
    matched: int
    send_ms: float
    receive_ms: float
    client_send_mean_ms: float | None


def points(quick: bool) -> list[Point]:
    scale = 1 if quick else 2
    out = []
    for c in (1, 8, 32, 64):
        n = max(24 * scale, 3 * c * scale)
        out.append(
            Point(
                f"concurrency {c}",
                f"c{c}",
                ConcurrencyLimited(kind="concurrency_limited", concurrency=c),
                {"type": "concurrency", "concurrency": c, "requests": n},
                n,
            )
        )
    for rate in (5.0, 20.0, 60.0, 400.0):
        n = int(min(max(24 * scale, rate * 3 * scale), 400))
        out.append(
            Point(
                f"poisson {rate:g}/s",
                f"p{rate:g}",
                RequestRateLimited(kind="request_rate_limited", request_rate=rate),
                {"type": "poisson", "rate": rate, "requests": n},
                n,
            )
        )
    return out


def prompts(n: int) -> list[str]:
    return [
        f"Request {i}: describe item {i} in detail. " + "Add context. " * (20 + i % 30)
        for i in range(n)
    ]


def aiperf_config(base_url: str, population: Path, point: Point, out: Path) -> dict[str, Any]:
    return {
        "schemaVersion": "2.0",
        "randomSeed": 11,
        "benchmark": {
            "model": "sim-model",
            "endpoint": {
                "url": f"{base_url}/v1/chat/completions",
                "type": "chat",
                "streaming": True,
                "timeout": 120,
                "useServerTokenCount": True,
                "extra": {"ignore_eos": True, "n": 1, "stream_options": {"include_usage": True}},
            },
            "dataset": {
                "type": "file",
                "path": str(population),
                "format": "mooncake_trace",
                "entries": point.requests,
                "sampling": "sequential",
            },
            "profiling": point.profiling,
            "tokenizer": {"name": TOKENIZER_DIR},
            "runtime": {"ui": "none"},
            "gpuTelemetry": {"enabled": False},
            "serverMetrics": {"enabled": False},
            "artifacts": {
                "dir": str(out),
                "prefix": "p",
                "summary": ["json"],
                "records": ["jsonl"],
                "raw": False,
            },
        },
    }


def run_point(point: Point, workdir: Path, placement: str) -> PointResult:
    workdir.mkdir(parents=True)
    population = workdir / "population.jsonl"
    write_population(population, prompts(point.requests), OUTPUT_TOKENS)
    chosen = PLACEMENTS[placement]
    chosen.pin_server()
    try:
        return _run_point(point, workdir, population, placement, chosen)
    finally:
        os.sched_setaffinity(0, ALL_CPUS)


def _run_point(
    point: Point, workdir: Path, population: Path, placement: str, chosen: Placement
) -> PointResult:
    with running_simulator(SimulatorConfig(latency=LATENCY)) as sim:
        config = workdir / "aiperf.json"
        config.write_text(
            json.dumps(aiperf_config(sim.base_url, population, point, workdir / "aiperf"))
        )
        command = [sys.executable, "-m", "aiperf", "profile", "--config", str(config)]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            preexec_fn=chosen.start_client,
        )
        if done.returncode != 0:
            raise SystemExit(f"{point.label}: aiperf failed\n{done.stdout[-2000:]}")
        truth = {r["x_request_id"]: r for r in sim.ground_truth() if r.get("kind") == "request"}
    records = workdir / "aiperf" / "p.jsonl"
    # The case stage's own parser and adapter: the verdict is the one a case would write.
    profiling = phase_records(read_records(records).profiling)
    return compare(point, placement, read_profiling(records), truth, profiling)


def read_profiling(path: Path) -> list[dict[str, Any]]:
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line]
    return [r for r in rows if r["metadata"]["benchmark_phase"] == "profiling"]


def ground_truth_ms(trace: dict[str, Any]) -> dict[str, float]:
    n = trace["completion_tokens"]
    first, last = trace["first_token_ns"], trace["last_token_ns"]
    return {
        "time_to_first_token": (first - trace["arrival_ns"]) / 1e6,
        "inter_token_latency": (last - first) / 1e6 / (n - 1),
        "request_latency": (trace["end_ns"] - trace["arrival_ns"]) / 1e6,
    }


def compare(
    point: Point,
    placement: str,
    rows: list[dict[str, Any]],
    truth: dict[str, Any],
    profiling: PhaseRecords,
) -> PointResult:
    pairs = [
        (r, truth[r["metadata"]["x_request_id"]])
        for r in rows
        if r["metadata"]["x_request_id"] in truth and not r.get("error")
    ]
    client = {tag: np.array([r["metrics"][tag]["value"] for r, _ in pairs]) for _, tag in METRICS}
    server = {tag: np.array([ground_truth_ms(t)[tag] for _, t in pairs]) for _, tag in METRICS}
    errors, p50s = {}, {}
    for name, tag in METRICS:
        c50, c99 = np.percentile(client[tag], [50, 99])
        s50, s99 = np.percentile(server[tag], [50, 99])
        errors[name] = ((c50 - s50) / s50, (c99 - s99) / s99)
        p50s[name] = float(s50)
    doc = assess(profiling, None, CaseFacts(load=point.load))
    failed = tuple(c.name for c in doc.dispatch.checks if c.verdict is Verdict.FAIL)
    send, receive = transit_ms(pairs)
    return PointResult(
        point,
        placement,
        errors,
        p50s,
        doc.dispatch.load_generator_kept_up,
        failed,
        len(pairs),
        send,
        receive,
        None if doc.dispatch.client_send_ms is None else doc.dispatch.client_send_ms.mean,
    )


def transit_ms(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> tuple[float, float]:
    """Median ms from client send to server arrival, and from server first token to client.

    Both sides stamp wall-clock ``time.time_ns()`` on the same host, so the difference is
    the loopback HTTP path plus both event loops: the part of the client's TTFT that the
    server never sees.
    """
    send = [t["arrival_ns"] - r["metadata"]["request_start_ns"] for r, t in pairs]
    receive = [
        r["metadata"]["request_start_ns"]
        + r["metrics"]["time_to_first_token"]["value"] * 1e6
        - t["first_token_ns"]
        for r, t in pairs
    ]
    return float(np.median(send)) / 1e6, float(np.median(receive)) / 1e6


def render(results: list[PointResult]) -> str:
    head = (
        f"{'load point':<18}{'placement':<14}{'n':>5}  "
        + "".join(f"{n + ' p50':>10}{n + ' p99':>10}" for n, _ in METRICS)
        + f"  {'GT p50 TTFT/ITL/E2E ms':>24}  {'send/recv ms':>12}  {'client send':>11}"
        "  kept up"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        cells = "".join(f"{r.errors[n][0]:>+10.2%}{r.errors[n][1]:>+10.2%}" for n, _ in METRICS)
        gt = "/".join(f"{r.ground_truth_p50_ms[n]:.1f}" for n, _ in METRICS)
        verdict = r.kept_up.value + (f" ({', '.join(r.failed_checks)})" if r.failed_checks else "")
        transit = f"{r.send_ms:.2f}/{r.receive_ms:.2f}"
        share = "n/a" if r.client_send_mean_ms is None else f"{r.client_send_mean_ms:.2f} ms"
        lines.append(
            f"{r.point.label:<18}{r.placement:<14}{r.matched:>5}  {cells}  {gt:>24}  "
            f"{transit:>12}  {share:>11}  {verdict}"
        )
    return "\n".join(lines)


def main() -> None:
    all_points = points(quick=False)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests per load point")
    parser.add_argument(
        "--placement",
        choices=[*PLACEMENTS, "all"],
        nargs="+",
        default=["all"],
        help="how client and server share the machine (default: every placement)",
    )
    parser.add_argument(
        "--load",
        choices=[p.key for p in all_points],
        nargs="+",
        help="run only these load points (default: all)",
    )
    args = parser.parse_args()
    placements = list(PLACEMENTS) if "all" in args.placement else args.placement
    chosen = [p for p in points(args.quick) if args.load is None or p.key in args.load]
    results = []
    with tempfile.TemporaryDirectory(prefix="fidelity-") as tmp:
        for i, point in enumerate(chosen):
            for placement in placements:
                results.append(run_point(point, Path(tmp) / f"point-{i}-{placement}", placement))
                print(f"done: {point.label} ({placement})", file=sys.stderr, flush=True)
    print(render(results))


if __name__ == "__main__":
    main()

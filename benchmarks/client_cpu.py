"""The load generator's own CPU per request: AIPerf's spinning loop vs our credit-waiting one.

AIPerf 0.13's request_rate strategy, in concurrency mode, polls for a free slot with nothing
but a yield to the event loop in between, so its timing manager holds most of a core while
every slot is busy. Our plugin's strategy (``case/aiperf_plugin/strategy.py``, named as the
profiling phase's ``timingMode: inferlab_credit_wait``) sleeps until a credit comes back. This
script runs real AIPerf against one simulator (its own process, so its CPU is not counted) at
each load with the switch off ("spin", AIPerf as shipped) and on ("wait"), the two interleaved,
and prints side by side, per load: client CPU ms per request over the load window (AIPerf's
whole process tree, sampled from /proc), the cores it kept busy, the host's mean run queue, and
the achieved request throughput. The per-process breakdown shows what remains.

    python benchmarks/client_cpu.py                # c=1, c=4, c=16; 2 runs of each
    python benchmarks/client_cpu.py --repeats 3 --load 16
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from synthetic import write_population

from inferlab_bench.case.aiperf_plugin.switches import CREDIT_WAIT_TIMING_MODE
from inferlab_bench.case.local import aiperf_environment
from inferlab_bench.case.usage import UsageSampler
from inferlab_bench.layout import cache_root
from inferlab_bench.runs.demo import TOKENIZER_DIR
from inferlab_bench.validity.client_cost import ClientUsage, window_usage

OUTPUT_TOKENS = 64
MODES = {"spin": None, "wait": CREDIT_WAIT_TIMING_MODE}  # the profiling phase's timingMode


@dataclass(frozen=True)
class Run:
    load: int
    mode: str
    requests: int
    window_s: float
    cpu_s: float
    mean_runnable: float
    throughput: float
    per_process: dict[str, float]

    @property
    def cpu_ms_per_request(self) -> float:
        return self.cpu_s * 1e3 / self.requests


def requests_for(concurrency: int) -> int:
    return max(24, 8 * concurrency)


@contextlib.contextmanager
def simulator(workdir: Path) -> Iterator[str]:
    """``inferlab-bench simulate`` as its own process; yields its base URL."""
    command = [sys.executable, "-m", "inferlab_bench", "simulate", "--port", "0"]
    command += ["--tokenizer", TOKENIZER_DIR, "--ground-truth", str(workdir / "truth.jsonl")]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    try:
        for line in process.stdout:
            found = re.search(r"http://127\.0\.0\.1:\d+", line)
            if found:
                yield found.group(0)
                return
        raise SystemExit("simulator did not start")
    finally:
        process.terminate()
        process.wait(timeout=10)


def prompts(n: int) -> list[str]:
    return [
        f"Question {i}: describe a harbour at dawn. " + "Add detail. " * (10 + i % 20)
        for i in range(n)
    ]


def aiperf_config(url: str, population: Path, c: int, n: int, out: Path) -> dict[str, Any]:
    body = {"ignore_eos": True, "n": 1, "stream_options": {"include_usage": True}}
    return {
        "schemaVersion": "2.0",
        "randomSeed": 1,
        "benchmark": {
            "model": "sim-model",
            "endpoint": {
                "url": url,
                "path": "/v1/chat/completions",
                "type": "chat",
                "streaming": True,
                "timeout": 120,
                "useServerTokenCount": True,
                "extra": body,
            },
            "dataset": {
                "type": "file",
                "path": str(population),
                "format": "mooncake_trace",
                "entries": n,
                "sampling": "sequential",
            },
            "profiling": {"type": "concurrency", "concurrency": c, "requests": n},
            "tokenizer": {"name": TOKENIZER_DIR},
            "runtime": {"ui": "none"},
            "gpuTelemetry": {"enabled": False},
            "serverMetrics": {"enabled": False},
            "artifacts": {"dir": str(out), "prefix": "p", "records": ["jsonl"]},
        },
    }


def run_once(url: str, workdir: Path, c: int, mode: str) -> Run:
    n = requests_for(c)
    workdir.mkdir(parents=True)
    population = workdir / "population.jsonl"
    write_population(population, prompts(n), OUTPUT_TOKENS)
    config = workdir / "aiperf.json"
    planned = aiperf_config(url, population, c, n, workdir / "out")
    if MODES[mode] is not None:
        planned["benchmark"]["profiling"]["timingMode"] = MODES[mode]
    config.write_text(json.dumps(planned))
    env = aiperf_environment(os.environ, cache_root())
    command = [sys.executable, "-m", "aiperf", "profile", "--config", str(config)]
    with (workdir / "aiperf.log").open("w") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, process_group=0
        )
        sampler = UsageSampler(process.pid, interval=0.1).start()
        breakdown = ProcessBreakdown(process.pid)
        while process.poll() is None:
            breakdown.sample()
            time.sleep(0.25)
        series = sampler.stop()
    if process.returncode != 0:
        raise SystemExit(f"c={c} {mode}: aiperf exited {process.returncode}, see {workdir}")
    starts, ends = profiling_window(workdir / "out" / "p.jsonl")
    lo, hi = min(starts), max(ends)
    usage = ClientUsage(series.time_ns, series.cpu_seconds, series.runnable, series.host_cores)
    found = window_usage(usage, lo, hi)
    assert found is not None, "no samples inside the load window"
    cpu, mean_run, _ = found
    window = (hi - lo) / 1e9
    return Run(
        c, mode, len(starts), window, cpu, mean_run, len(starts) / window, breakdown.spent(lo, hi)
    )


def profiling_window(records: Path) -> tuple[list[int], list[int]]:
    rows = [orjson.loads(line) for line in records.read_bytes().splitlines() if line]
    meta = [r["metadata"] for r in rows if r["metadata"]["benchmark_phase"] == "profiling"]
    return [m["request_start_ns"] for m in meta], [m["request_end_ns"] for m in meta]


class ProcessBreakdown:
    """CPU seconds per AIPerf service (by process title) between two wall-clock times."""

    def __init__(self, session: int) -> None:
        self._session = session
        self._titles: dict[int, str] = {}
        self._snapshots: list[tuple[int, dict[int, float]]] = []

    def sample(self) -> None:
        cpu: dict[int, float] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_bytes()
                fields = stat[stat.rfind(b")") + 2 :].split()
                if int(fields[3]) != self._session:
                    continue
                pid = int(entry.name)
                cpu[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
                title = self._title(entry)  # a fresh child renames itself; a dying one has none
                if title is not None:
                    self._titles[pid] = title
        self._snapshots.append((time.time_ns(), cpu))

    @staticmethod
    def _title(entry: Path) -> str | None:
        cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        found = re.search(r"aiperf (\w+?)(?:_[0-9a-f]{4,})?\b", cmd)
        return found.group(1) if found else None

    def spent(self, lo_ns: int, hi_ns: int) -> dict[str, float]:
        before = [cpu for t, cpu in self._snapshots if t <= lo_ns] or [{}]
        after = [cpu for t, cpu in self._snapshots if t >= hi_ns] or [self._snapshots[-1][1]]
        out: dict[str, float] = {}
        for pid, cpu in after[0].items():
            title = self._titles.get(pid, "other")
            out[title] = out.get(title, 0.0) + cpu - before[-1].get(pid, 0.0)
        return out


def render(runs: list[Run]) -> str:
    head = (
        f"{'load':<6}{'mode':<6}{'runs':>5}{'CPU ms/req':>12}{'spread':>16}"
        f"{'cores':>7}{'run queue':>11}{'req/s':>8}{'spread':>15}"
    )
    lines = [head, "-" * len(head)]
    for c in sorted({r.load for r in runs}):
        for mode in MODES:
            mine = [r for r in runs if r.load == c and r.mode == mode]
            if not mine:
                continue
            cpu = [r.cpu_ms_per_request for r in mine]
            rps = [r.throughput for r in mine]
            cores = statistics.median(r.cpu_s / r.window_s for r in mine)
            queue = statistics.median(r.mean_runnable for r in mine)
            lines.append(
                f"c={c:<4}{mode:<6}{len(mine):>5}{statistics.median(cpu):>12.1f}"
                f"{f'{min(cpu):.1f}-{max(cpu):.1f}':>16}{cores:>7.2f}{queue:>11.2f}"
                f"{statistics.median(rps):>8.1f}{f'{min(rps):.1f}-{max(rps):.1f}':>15}"
            )
    lines.append("")
    lines.append(
        "Client CPU ms per request by AIPerf process over the load window (median; wait mode):"
    )
    for c in sorted({r.load for r in runs}):
        mine = [r for r in runs if r.load == c and r.mode == "wait"]
        if not mine:
            continue
        per = [{t: v * 1e3 / r.requests for t, v in r.per_process.items()} for r in mine]
        titles = sorted({t for p in per for t in p}, key=lambda t: -per[0].get(t, 0.0))
        parts = [f"{t} {statistics.median(p.get(t, 0.0) for p in per):.1f}" for t in titles]
        lines.append(f"  c={c}: " + ", ".join(parts))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=int, nargs="+", default=[1, 4, 16], help="concurrencies")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each mode per load")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    args = parser.parse_args()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="client-cpu-") as tmp, simulator(Path(tmp)) as url:
        for c in args.load:
            for i in range(args.repeats):
                for mode in args.modes:  # interleaved: machine noise hits both alike
                    run = run_once(url, Path(tmp) / f"c{c}-{mode}-{i}", c, mode)
                    runs.append(run)
                    print(
                        f"c={c} {mode} #{i + 1}: {run.cpu_ms_per_request:.1f} ms CPU/request, "
                        f"{run.throughput:.1f} req/s",
                        file=sys.stderr,
                        flush=True,
                    )
    print(render(runs))


if __name__ == "__main__":
    main()

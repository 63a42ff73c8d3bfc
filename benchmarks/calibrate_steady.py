"""The steady-state judgment scored against a truth known by design: the load the server got.

``validity.json``'s ``steady_state`` tells a user "Never reached a steady state" when a run's
state or latencies kept moving to its end. Whether a run can settle is known before it runs:

- a closed loop settles at any concurrency: the server's queue can never exceed it;
- an open loop settles when its rate is one the server sustains: utilization at most 0.8
  of the capacity measured here;
- an open loop at 1.5x that capacity or more cannot settle: its queue grows to the end.

Rates between 0.8 and 1.5 are run but not scored: near saturation a finite run may or may
not show its queue, and neither answer is wrong. The capacity is the server's own count: a
closed loop at four times its running sequences, completions per second over the simulator's
ground truth (first arrival to last end). Every run is an ordinary ``inferlab-bench run``
against ``inferlab-bench simulate``; two servers, one ending each batch's requests together
(equal output lengths, no jitter: a closed loop then sends in waves) and one with every
duration jittered by 30%. Each run is judged by the rule as it stands (the state is how many
others were in flight over each request's life) and by the rule before (the count at each
send), from the same records.

    python benchmarks/calibrate_steady.py               # about 10 minutes on 2 cores
    python benchmarks/calibrate_steady.py --hog         # the same with a CPU hog on every core
    python benchmarks/calibrate_steady.py --quick       # one run of each kind
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.calibrate import MODEL, Simulator, hog, run_command  # noqa: E402
from inferlab_bench.case.records import read_records  # noqa: E402
from inferlab_bench.validity.adapter import phase_records  # noqa: E402
from inferlab_bench.validity.steady import (  # noqa: E402
    BATCH,
    MIN_BATCHES,
    cut_series,
)

# TTFT ~60 ms, 16 tokens at ~6 ms: about 0.15 s a request, 8 at a time (~50 requests/s).
SERVER = ("--prefill-base-ms", "40", "--prefill-ms-per-token", "0.1", "--decode-base-ms", "5")
SLOTS = 8
OUTPUT_TOKENS = 16  # and calibrate's 200-token prompts
SERVERS = {"lockstep": (), "jitter 30%": ("--jitter", "0.3")}
SETTLES_AT_MOST = 0.8
NEVER_SETTLES_FROM = 1.5


@dataclass(frozen=True)
class Load:
    name: str
    concurrency: int | None = None
    utilization: float | None = None
    """Of the measured capacity (an open loop, poisson unless ``burstiness``)."""
    burstiness: float | None = None
    requests: int = 200

    def settles(self) -> bool | None:
        """The truth: True, False, or None where neither answer is wrong."""
        if self.concurrency is not None:
            return True
        assert self.utilization is not None
        if self.utilization <= SETTLES_AT_MOST:
            return True
        return False if self.utilization >= NEVER_SETTLES_FROM else None


def loads(quick: bool) -> list[Load]:
    if quick:
        return [Load("c=8", concurrency=8), Load("rate 0.5", utilization=0.5)]
    return [
        Load("c=1", concurrency=1, requests=100),
        Load("c=8", concurrency=8),
        Load("c=32", concurrency=32),
        Load("rate 0.3", utilization=0.3, requests=120),
        Load("rate 0.6", utilization=0.6),
        Load("rate 0.8", utilization=0.8),
        Load("gamma 0.25 at 0.6", utilization=0.6, burstiness=0.25),
        Load("rate 1.1", utilization=1.1),
        Load("rate 1.5", utilization=1.5),
        Load("rate 2.5", utilization=2.5),
    ]


@dataclass
class Scored:
    server: str
    load: str
    settles: bool | None
    now: str
    before: str
    moving_now: list[str]
    moving_before: list[str]
    requests: int
    seconds: float
    load_1min: float


def run(sim: Simulator, load: Load, capacity: float, out: Path) -> float:
    if load.concurrency is not None:
        shape = ["--concurrency", str(load.concurrency)]
    else:
        assert load.utilization is not None
        shape = ["--rate", f"{load.utilization * capacity:.3f}"]
        if load.burstiness is not None:
            shape += ["--burstiness", str(load.burstiness)]
    command = run_command(sim.url, MODEL, shape, load.requests, out, output_tokens=OUTPUT_TOKENS)
    started = time.monotonic()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.monotonic() - started


def capacity_of(sim: Simulator, out: Path) -> float:
    """Completions per second of the server held full (its own records)."""
    offset = sim.offset()
    run(sim, Load("capacity", concurrency=4 * SLOTS, requests=300), 0.0, out)
    rows = sim.rows_since(offset)
    first = min(r["arrival_ns"] for r in rows)
    last = max(r["end_ns"] for r in rows)
    return float(len(rows) / ((last - first) / 1e9))


def rule_before(out: Path, today: dict[str, Any]) -> tuple[str, list[str]]:
    """The verdict as it stood: the state counted at each send, the latencies as today."""
    records = phase_records(read_records(out / "aiperf" / "profile.jsonl").profiling)
    order = np.argsort(records.start_ns, kind="stable")
    start, end = records.start_ns[order], records.end_ns[order]
    loaded = end <= start[-1]
    if int(loaded.sum()) < BATCH * MIN_BATCHES:
        return "unknown", []
    at_send = np.arange(len(start)) - np.searchsorted(np.sort(end), start, side="right")
    state = cut_series("in_flight_at_send", at_send[loaded].astype(np.float64))
    moving = [] if state.settled else [state.series]
    moving += [
        c["series"] for c in today["cuts"] if c["series"] != "in_flight_during" and not c["settled"]
    ]
    return ("fail" if moving else "pass"), moving


def score(server: str, load: Load, out: Path, seconds: float) -> Scored | None:
    path = out / "validity.json"
    if not path.is_file():
        print(f"failed: {server} {load.name}: no validity.json", file=sys.stderr)
        return None
    today = json.loads(path.read_text())["steady_state"]
    before, moving_before = rule_before(out, today)
    return Scored(
        server=server,
        load=load.name,
        settles=load.settles(),
        now=today["reached"],
        before=before,
        moving_now=[c["series"] for c in today["cuts"] if not c["settled"]],
        moving_before=moving_before,
        requests=today["requests"],
        seconds=seconds,
        load_1min=os.getloadavg()[0],
    )


def table(runs: list[Scored]) -> str:
    lines = [
        "| server | load | truth | runs | now: pass/fail/unknown | before: pass/fail/unknown |"
    ]
    lines.append("|---|---|---|---|---|---|")
    keys = dict.fromkeys((r.server, r.load) for r in runs)
    for server, load in keys:
        group = [r for r in runs if (r.server, r.load) == (server, load)]
        truth = {True: "settles", False: "never", None: "not scored"}[group[0].settles]
        now = "/".join(str(sum(r.now == v for r in group)) for v in ("pass", "fail", "unknown"))
        was = "/".join(str(sum(r.before == v for r in group)) for v in ("pass", "fail", "unknown"))
        lines.append(f"| {server} | {load} | {truth} | {len(group)} | {now} | {was} |")
    for rule in ("now", "before"):
        settled = [r for r in runs if r.settles is True]
        never = [r for r in runs if r.settles is False]
        alarms = sum(getattr(r, rule) == "fail" for r in settled)
        misses = sum(getattr(r, rule) == "pass" for r in never)
        unknown = sum(getattr(r, rule) == "unknown" for r in settled + never)
        lines.append(
            f"\n{rule}: false alarms {alarms}/{len(settled)}, misses {misses}/{len(never)}, "
            f"unknown {unknown}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run of two loads")
    parser.add_argument("--hog", action="store_true", help="a CPU hog on every core throughout")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each load (default 2)")
    parser.add_argument("--json", type=Path, help="write every run's verdicts here")
    parser.add_argument("--report", type=Path, nargs="+", help="print tables of earlier --json")
    args = parser.parse_args()
    if args.report:
        saved = [Scored(**row) for path in args.report for row in json.loads(path.read_text())]
        print(table(saved))
        return
    runs: list[Scored] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="steady-") as scratch, hog(args.hog):
        for s, (server, extra) in enumerate(SERVERS.items()):
            work = Path(scratch) / f"server-{s}"
            work.mkdir()
            sim = Simulator(work, (*SERVER, "--max-num-seqs", str(SLOTS), *extra))
            try:
                capacity = capacity_of(sim, work / "capacity")
                print(f"{server}: capacity {capacity:.1f} requests/s", file=sys.stderr)
                for i, load in enumerate(loads(args.quick)):
                    for k in range(1 if args.quick else args.repeats):
                        out = work / f"load-{i}-{k}"
                        seconds = run(sim, load, capacity, out)
                        found = score(server, load, out, seconds)
                        if found is None:
                            continue
                        runs.append(found)
                        print(
                            f"{server} {load.name}: now {found.now} {found.moving_now}, before "
                            f"{found.before} {found.moving_before} ({seconds:.0f} s)",
                            file=sys.stderr,
                            flush=True,
                        )
                        if args.json:
                            args.json.write_text(json.dumps([asdict(r) for r in runs]))
            finally:
                sim.stop()
    print(table(runs))
    print(f"\n{len(runs)} runs in {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()

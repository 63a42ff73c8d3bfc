"""What holds the server's core when a request is late: a scheduler trace around each one.

Runs ``inferlab-bench run`` (as a user types it) at one load against ``inferlab-bench
simulate`` under ``perf sched record`` (Linux, root or perf_event_paranoid <= 1), joins every
request to the simulator's ground truth by X-Request-ID, and for each request whose TTFT
overhead exceeds 0.8 ms finds the server thread's wait for a core that ended where the server
read it (the scheduler slice in which the server stamped its arrival, and that slice's
scheduling delay), and the same for our AIPerf worker's read of the first token (a wait
after the server's write). For each wait it lists who ran on the cores instead, by process
(AIPerf's services by their titles, our own command, the sampler thread, others), summed
over every late request and, as a baseline, over the requests that were not late.

    python benchmarks/late_cause.py --population real --requests 200 --concurrency 1
"""

from __future__ import annotations

import argparse
import bisect
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from peers import LATE_MS, MODEL, Load, Simulator, prepared, truth_ms

from inferlab_bench.case.aiperf_plugin.priorities import service_title
from inferlab_bench.runs.demo import TOKENIZER_DIR


@dataclass(frozen=True)
class Slice:
    """A task on a core: [start, end] in CLOCK_MONOTONIC seconds, after ``delay`` runnable."""

    pid: int
    tid: int
    comm: str
    cpu: int
    start: float
    end: float
    delay: float


def parse_timehist(text: str) -> list[Slice]:
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or not parts[1].startswith("["):
            continue
        try:
            end, cpu = float(parts[0]), int(parts[1].strip("[]"))
            run, delay = float(parts[-1]) / 1e3, float(parts[-2]) / 1e3
        except ValueError:
            continue
        name = " ".join(parts[2:-3])
        comm, _, ids = name.rpartition("[")
        tid_pid = ids.rstrip("]").split("/")
        tid = int(tid_pid[0]) if tid_pid[0].isdigit() else -1
        pid = int(tid_pid[1]) if len(tid_pid) > 1 and tid_pid[1].isdigit() else tid
        out.append(Slice(pid, tid, comm, cpu, end - run, end, delay))
    return out


ROOT = [0]
"""The traced command's pid: its descendants are ours, every other process is elsewhere."""


class Titles:
    """pid -> command line, polled while the run goes (processes are gone afterwards)."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.parents: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self.poll()

    def poll(self) -> None:
        for entry in Path("/proc").iterdir():
            # Every poll: AIPerf's children start with their parent's title (``aiperf
            # system_controller``) and take their own only later.
            if entry.name.isdigit():
                try:
                    raw = (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip()
                    stat = (entry / "stat").read_bytes()
                except OSError:
                    continue
                self.names[int(entry.name)] = raw.decode(errors="replace")[:60]
                self.parents.setdefault(
                    int(entry.name), int(stat[stat.rfind(b")") + 2 :].split()[1])
                )

    def descends(self, pid: int, root: int) -> bool:
        """Whether ``pid`` is ``root`` or one of its descendants (as far as was seen)."""
        for _ in range(64):
            if pid == root:
                return True
            if pid not in self.parents:
                return False
            pid = self.parents[pid]
        return False

    def __enter__(self) -> Titles:
        self.poll()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


def label(s: Slice, titles: Titles, sim_pid: int) -> str:
    """Who a slice belongs to: the server, an AIPerf service, our command, or someone else."""
    if s.pid == sim_pid:
        return "the server (simulator)"
    if s.comm.startswith("swapper"):
        return "idle"
    title = titles.names.get(s.pid, "")
    if not titles.descends(s.pid, ROOT[0]):
        return f"elsewhere: {title[:40] or s.comm}"
    service = service_title(s.pid) or _service(title)
    if service is not None:
        return f"aiperf {service}" + (f" ({s.comm})" if "ZMQ" in s.comm else "")
    if "inferlab_bench run" in title:
        return "inferlab-bench run" + (" (usage sampler)" if s.comm == "usage-sampler" else "")
    if "-m aiperf profile" in title:
        return "aiperf system_controller"
    return f"elsewhere: {title[:40] or s.comm}"


def _service(title: str) -> str | None:
    found = re.match(r"aiperf (\w+?)(?:_[0-9a-f]{4,})?(?:\s|$)", title)
    return found.group(1) if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", choices=["synthetic", "real"], default="real")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    work: Path = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    workload = prepared(args.population, args.requests, work)
    load = Load("c", args.requests, concurrency=args.concurrency)
    sim = Simulator(work / "sim")
    wall_minus_mono = time.time_ns() - time.monotonic_ns()
    command = ["perf", "sched", "record", "-k", "CLOCK_MONOTONIC", "-a", "-o", str(work / "p.data")]
    command += ["--", sys.executable, "-m", "inferlab_bench", "run"]
    command += ["--concurrency", str(load.concurrency), "--url", sim.url, "--model", MODEL]
    command += ["--tokenizer", TOKENIZER_DIR, "--population", str(workload.population)]
    command += ["--requests", str(load.requests), "--out", str(work / "run")]
    try:
        with Titles() as titles, (work / "run.log").open("w") as log:
            traced = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            ROOT[0] = traced.pid
            if traced.wait() != 0:
                raise SystemExit(f"perf or the run failed: see {work / 'run.log'}")
        time.sleep(0.3)
        truth = sim.truth_since(0)
    finally:
        sim.stop()
    records = next((work / "run").rglob("profile.jsonl"))
    timehist = subprocess.run(
        ["perf", "sched", "timehist", "-i", str(work / "p.data")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    slices = sorted(parse_timehist(timehist), key=lambda s: s.start)
    workers = {pid for pid, title in titles.names.items() if _service(title) == "worker"}
    workers &= {pid for pid in titles.names if titles.descends(pid, ROOT[0])}
    report(slices, joined(records, truth, wall_minus_mono), titles, sim.process.pid, workers)


@dataclass(frozen=True)
class Joined:
    """One request: its TTFT overhead, and when the server and our worker each read it."""

    overhead_ms: float
    server_read_s: float  # the server's parser stamp (CLOCK_MONOTONIC s)
    client_read_s: float  # our worker's first-token stamp (CLOCK_MONOTONIC s)
    into_run_s: float


def joined(records: Path, truth: list[dict[str, Any]], offset: int) -> list[Joined]:
    by_id = {t.get("x_request_id"): t for t in truth}
    rows = []
    for line in records.read_bytes().splitlines():
        row = orjson.loads(line)
        meta = row["metadata"]
        t = by_id.get(meta.get("x_request_id"))
        if meta["benchmark_phase"] != "profiling" or row.get("error") or t is None:
            continue
        ttft_ms = row["metrics"]["time_to_first_token"]["value"]
        read_ns = meta["request_start_ns"] + ttft_ms * 1e6
        rows.append((ttft_ms - truth_ms(t)["ttft"], t["arrival_ns"], read_ns))
    first = min(r[1] for r in rows)
    return [
        Joined(over, (at - offset) / 1e9, (read - offset) / 1e9, (at - first) / 1e9)
        for over, at, read in rows
    ]


LONGEST_SLICE_S = 0.5
"""Slices are looked up from this far before a wait (a task rarely runs longer unpreempted)."""


def wait_before(
    slices: list[Slice], pids: set[int], at: float, titles: Titles, sim_pid: int
) -> tuple[float, dict[str, float]] | None:
    """The scheduling delay (ms) of the slice of ``pids`` running at ``at``, and who ran on
    the cores while it waited (ms by label); None when none of them ran then.

    ``slices`` are sorted by start."""
    starts = _starts(slices)
    lo_i = bisect.bisect_left(starts, at - LONGEST_SLICE_S)
    hi_i = bisect.bisect_right(starts, at)
    near = slices[lo_i:hi_i]
    mine = next((s for s in near if s.pid in pids and s.start <= at <= s.end), None)
    if mine is None:
        return None
    lo, hi = mine.start - mine.delay, mine.start
    held: dict[str, float] = defaultdict(float)
    for s in slices[
        bisect.bisect_left(starts, lo - LONGEST_SLICE_S) : bisect.bisect_right(starts, hi)
    ]:
        if s.pid in pids or s.end <= lo or s.start >= hi:
            continue
        held[label(s, titles, sim_pid)] += (min(s.end, hi) - max(s.start, lo)) * 1e3
    return mine.delay * 1e3, held


_STARTS: dict[int, list[float]] = {}


def _starts(slices: list[Slice]) -> list[float]:
    if id(slices) not in _STARTS:
        _STARTS[id(slices)] = [s.start for s in slices]
    return _STARTS[id(slices)]


def report(
    slices: list[Slice], requests: list[Joined], titles: Titles, sim_pid: int, workers: set[int]
) -> None:
    """Per late request its two waits; then, late and not late, who held the cores."""
    sides = {"server, before its read": {sim_pid}, "our worker, before its read": workers}
    totals: dict[tuple[str, bool], dict[str, float]] = {
        (side, late): defaultdict(float) for side in sides for late in (True, False)
    }
    waits: dict[tuple[str, bool], list[float]] = {key: [] for key in totals}
    lines = []
    for r in requests:
        late = r.overhead_ms > LATE_MS
        found = {}
        for side, pids in sides.items():
            at = r.server_read_s if side.startswith("server") else r.client_read_s
            got = wait_before(slices, pids, at, titles, sim_pid)
            if got is None:
                continue
            found[side] = got
            waits[side, late].append(got[0])
            for who, ms in got[1].items():
                totals[side, late][who] += ms
        if late:
            parts = []
            for side, (delay, held) in found.items():
                top = ", ".join(f"{n} {ms:.2f}" for n, ms in sorted(held.items(), key=_ms)[:2])
                parts.append(f"{side.split(',')[0]} waited {delay:.2f} ms ({top})")
            lines.append(f"  +{r.into_run_s:6.1f} s {r.overhead_ms:.2f} ms: " + "; ".join(parts))
    late_n = sum(r.overhead_ms > LATE_MS for r in requests)
    print(f"{late_n} late requests (> {LATE_MS} ms), {len(requests) - late_n} not late")
    print("\n".join(lines))
    for (side, late), held in totals.items():
        n = max(1, len(waits[side, late]))
        mean = sum(waits[side, late]) / n
        print(f"{'late' if late else 'not late'}: {side}: wait for a core, mean {mean:.2f} ms")
        for who, ms in sorted(held.items(), key=_ms)[:8]:
            print(f"    {who:<44} {ms / n:7.3f} ms per request")


def _ms(item: tuple[str, float]) -> float:
    return -item[1]


if __name__ == "__main__":
    main()

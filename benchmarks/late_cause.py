"""What holds the server's core when a request is late: a scheduler trace around each one.

Runs ``inferlab-bench run`` (as a user types it) at one load against ``inferlab-bench
simulate`` under ``perf sched record`` (Linux, root or perf_event_paranoid <= 1), joins every
request to the simulator's ground truth by X-Request-ID, and for each request whose TTFT
overhead exceeds 0.8 ms finds the server thread's wait for a core that ended where the server
read it (the scheduler slice in which the server stamped its arrival, and that slice's
scheduling delay). For that wait it lists who ran on the cores instead, by process
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

from peers import LATE_MS, MODEL, Load, Simulator, overheads, prepared, read_ours

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
            if entry.name.isdigit() and int(entry.name) not in self.names:
                try:
                    raw = (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip()
                    stat = (entry / "stat").read_bytes()
                except OSError:
                    continue
                self.names[int(entry.name)] = raw.decode(errors="replace")[:60]
                self.parents[int(entry.name)] = int(stat[stat.rfind(b")") + 2 :].split()[1])

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
    measured = read_ours(next((work / "run").rglob("profile.jsonl")))
    diffs = overheads("x_request_id", measured, truth)
    timehist = subprocess.run(
        ["perf", "sched", "timehist", "-i", str(work / "p.data")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    slices = parse_timehist(timehist)
    report(slices, diffs, titles, sim.process.pid, wall_minus_mono)


def report(
    slices: list[Slice], diffs: dict[str, object], titles: Titles, sim_pid: int, offset: int
) -> None:
    server = sorted((s for s in slices if s.pid == sim_pid), key=lambda s: s.start)
    starts = [s.start for s in server]
    holders: dict[bool, dict[str, float]] = {True: defaultdict(float), False: defaultdict(float)}
    waits: dict[bool, list[float]] = {True: [], False: []}
    late_lines = []
    ttft, arrival = diffs["ttft"], diffs["arrival_ns"]  # type: ignore[index]
    first = min(arrival)  # type: ignore[type-var]
    for over, at_ns in zip(ttft, arrival, strict=True):  # type: ignore[call-overload]
        at = (int(at_ns) - offset) / 1e9
        i = bisect.bisect_right(starts, at) - 1
        if i < 0 or server[i].end < at:
            continue
        mine = server[i]
        late = bool(over > LATE_MS)
        waited = (mine.start - mine.delay, mine.start)
        waits[late].append(mine.delay * 1e3)
        held: dict[str, float] = defaultdict(float)
        for s in slices:
            if s.pid == sim_pid or s.end <= waited[0] or s.start >= waited[1]:
                continue
            overlap = min(s.end, waited[1]) - max(s.start, waited[0])
            held[label(s, titles, sim_pid)] += overlap * 1e3
        for name, ms in held.items():
            holders[late][name] += ms
        if late:
            top = sorted(held.items(), key=lambda kv: -kv[1])[:3]
            shown = ", ".join(f"{n} {ms:.2f}" for n, ms in top)
            late_lines.append(
                f"  +{(int(at_ns) - first) / 1e9:6.1f} s overhead {over:.2f} ms, server waited "
                f"{mine.delay * 1e3:.2f} ms for a core; held by: {shown}"
            )
    print(f"{len(waits[True])} late requests (> {LATE_MS} ms), {len(waits[False])} not late")
    print("\n".join(late_lines))
    for late in (True, False):
        n = max(1, len(waits[late]))
        name = "late" if late else "not late"
        print(
            f"{name}: server's wait for a core before its read, mean {sum(waits[late]) / n:.2f} ms"
        )
        for who, ms in sorted(holders[late].items(), key=lambda kv: -kv[1])[:10]:
            print(f"    {who:<40} {ms / n:7.3f} ms per request")


if __name__ == "__main__":
    main()

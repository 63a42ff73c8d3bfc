"""What the per-request progress costs: CPU of the thread that tails AIPerf's records.

A writer appends record-sized lines (2.5 kB, as AIPerf's ``profile.jsonl`` has them) to the
records file of one case at a time, at a given rate, in an output folder that already holds
many finished cases (the glob that finds new case folders walks them all). The progress
thread runs as in a command; its own CPU clock (``time.thread_time``) is the cost.

Run: ``python benchmarks/progress_cost.py [SECONDS] [RATE] [OLD_CASES]`` (defaults 10 200 200).
Prints one JSON object: the thread's CPU seconds, that as a share of one core, per poll.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from inferlab_bench.cli import requestprogress
from inferlab_bench.cli.requestprogress import Snapshot, Watcher

RECORD = b'{"metadata":' + b'"x"' * 800 + b"}\n"


def main(seconds: float, rate: float, old_cases: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(old_cases):
            old = root / f"{i:03d}-old" / "aiperf" / "profile.jsonl"
            old.parent.mkdir(parents=True)
            old.write_bytes(RECORD * 40)
        seen: list[Snapshot] = []
        watcher = Watcher(root, None, seen.append)
        watcher.start()
        written = _write(root, seconds, rate)
        time.sleep(requestprogress.RESCAN_SECONDS + 2 * requestprogress.POLL_SECONDS)
        watcher.stop()
    polls = len(seen)
    return {
        "seconds": seconds,
        "records_written": written,
        "records_counted": seen[-1].done if seen else 0,
        "old_cases": old_cases,
        "polls": polls,
        "thread_cpu_seconds": round(watcher.cpu_seconds, 4),
        "share_of_one_core": round(watcher.cpu_seconds / (seconds + 2.0), 5),
        "cpu_ms_per_poll": round(1000 * watcher.cpu_seconds / max(polls, 1), 3),
    }


def _write(root: Path, seconds: float, rate: float) -> int:
    written, start, case = 0, time.monotonic(), 0
    path = root / "new-00" / "aiperf" / "profile.jsonl"
    path.parent.mkdir(parents=True)
    while (elapsed := time.monotonic() - start) < seconds:
        if elapsed > (case + 1) * seconds / 3:  # a new case folder every third of the run
            case += 1
            path = root / f"new-{case:02d}" / "aiperf" / "profile.jsonl"
            path.parent.mkdir(parents=True)
        due = int(elapsed * rate) - written
        if due > 0:
            with open(path, "ab") as handle:
                handle.write(RECORD * due)
            written += due
        time.sleep(0.02)
    return written


if __name__ == "__main__":
    args = [float(a) for a in sys.argv[1:4]]
    seconds, rate, old = (args + [10.0, 200.0, 200.0][len(args) :])[:3]
    print(json.dumps(main(seconds, rate, int(old)), indent=2))

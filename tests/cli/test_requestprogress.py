"""Per-request progress read from the records AIPerf writes: the tail, the count, the lines."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferlab_bench.cli.requestprogress import RecordTail, RequestCount, Snapshot
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR

LINE = re.compile(r"^inferlab-bench: progress: (\d+)/(\d+) requests done")


def _records(folder: Path) -> Path:
    path = folder / "aiperf" / "profile.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def test_the_tail_counts_only_new_whole_lines(tmp_path: Path) -> None:
    old = _records(tmp_path / "01-c1")
    old.write_bytes(b"{}\n{}\n")  # a previous run's records: not this command's
    tail = RecordTail(tmp_path)
    assert tail.new_lines(now=10.0) == 0
    _append(old, b"{}\n{")  # one whole line and half of the next
    assert tail.new_lines(now=10.5) == 0  # files are looked for again every 2 s
    assert tail.new_lines(now=12.0) == 1
    _append(old, b"}\n")
    assert tail.new_lines(now=12.5) == 1  # a file being written is read every poll
    deep = _records(tmp_path / "reproduced" / "run" / "01-c1" / "trial-01")
    deep.write_bytes(b"{}\n{}\n{}\n")
    _records(tmp_path / "too" / "deep" / "a" / "b" / "c" / "d").write_bytes(b"{}\n")
    assert tail.new_lines(now=13.0) == 0
    assert tail.new_lines(now=14.5) == 3


def test_a_replaced_records_file_counts_from_its_start(tmp_path: Path) -> None:
    path = _records(tmp_path)
    path.write_bytes(b"{}\n" * 5)
    tail = RecordTail(tmp_path)
    replacement = path.with_name("new.jsonl")
    replacement.write_bytes(b"{}\n" * 2)
    os.replace(replacement, path)  # a re-run into the same folder: a new, shorter file
    assert tail.new_lines(now=5.0) == 2


def test_rate_and_eta_come_from_the_recent_count() -> None:
    count = RequestCount(planned=100)
    assert count.add(0, now=0.0) == Snapshot(0, 100, None, None)
    count.add(10, now=5.0)
    snapshot = count.add(10, now=10.0)
    assert snapshot.done == 20 and snapshot.rate == pytest.approx(2.0)
    assert snapshot.eta_seconds == pytest.approx(40.0)
    assert snapshot.line("sweep 1/3 cases") == (
        "progress: 20/100 requests done, 2.0/s, ETA 40s; sweep 1/3 cases"
    )
    unknown = RequestCount(planned=None).add(3, now=1.0)
    assert unknown.line() == "progress: 3 requests done"


@pytest.fixture(scope="module")
def slow_server() -> Iterator[str]:
    """0.3-0.4 s a request at concurrency 1: 40 requests take 10 s or more of load."""
    latency = LatencyConfig(prefill_base_ms=100, prefill_ms_per_token=0, decode_base_ms=30)
    config = SimulatorConfig(model="sim", tokenizer=TOKENIZER_DIR, latency=latency)
    with running_simulator(config) as sim:
        yield sim.base_url


@pytest.mark.timeout(300)
def test_a_piped_run_prints_increasing_counts_on_stderr(slow_server: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            *("-m", "inferlab_bench", "run", "--url", slow_server, "--model", "sim"),
            *("--tokenizer", TOKENIZER_DIR, "--random-input-tokens", "16"),
            *("--random-output-tokens", "8", "--concurrency", "1", "--requests", "38"),
            *("--warmup", "2", "--out", str(tmp_path), "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    json.loads(proc.stdout)  # stdout stays the JSON document alone
    counts = [(int(m[1]), int(m[2])) for m in map(LINE.match, proc.stderr.splitlines()) if m]
    assert len(counts) >= 2, proc.stderr[-3000:]
    assert {planned for _, planned in counts} == {40}  # requests + warmup
    done = [d for d, _ in counts]
    assert done == sorted(done) and len(set(done)) >= 2 and done[-1] > 0, done

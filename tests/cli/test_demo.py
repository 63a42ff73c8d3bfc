"""The README's main command, end to end: `inferlab-bench demo`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.report.test_check import assert_consistent
from tests.report.test_plots import assert_nontrivial_png


def test_demo_runs_offline_and_its_numbers_make_sense(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "inferlab_bench", "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "synthetic ShareGPT-format sample" in proc.stderr  # says which data it used
    for label in ("c=1", "c=4", "c=16"):
        assert label in proc.stdout
    cases = sorted((out / "sweep").glob("*/result.json"))
    results = [json.loads(p.read_text()) for p in cases]
    assert [r["status"] for r in results] == ["succeeded"] * 3
    assert all(r["completed_requests"] == 32 and r["failed_requests"] == 0 for r in results)
    throughput = [r["metrics"]["request_throughput"] for r in results]
    assert throughput[0] < throughput[1] < throughput[2]  # more concurrency, more throughput
    assert all(
        0 < r["metrics"]["p50_ttft_ms"] < r["metrics"]["p50_request_latency_ms"] for r in results
    )
    truth = [
        json.loads(line) for line in (out / "simulator-ground-truth.jsonl").read_text().splitlines()
    ]
    assert sum(1 for t in truth if t["kind"] == "reset") == 3  # one reset before each case
    requests = [t for t in truth if t["kind"] == "request"]
    assert len(requests) == 3 * (32 + 4) and {t["completion_tokens"] for t in requests} == {32}
    population = (out / "population" / "population.jsonl").read_text().splitlines()
    assert len(population) == 36
    assert_nontrivial_png(out / "sweep" / "plots" / "latency-cdf.png")
    assert_nontrivial_png(out / "sweep" / "plots" / "sweep.png")
    assert assert_consistent(out)["cases"] == 3  # report --check: every output agrees

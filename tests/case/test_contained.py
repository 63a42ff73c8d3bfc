"""A case writes only into its artifact dir and our cache: nothing under the user's home.

AIPerf keeps its dataset cache under ``~/.cache/aiperf`` whatever XDG_CACHE_HOME says, and
matplotlib its config under ``~/.config``; the case points both at our cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from inferlab_bench.protocol import BenchClientResult, ClientStatus
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR, make_request, write_population


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_case_writes_nothing_outside_its_artifact_dir_and_our_cache(
    tmp_path: Path, check_v6: Any
) -> None:
    home, cache, work = tmp_path / "home", tmp_path / "cache", tmp_path / "work"
    for directory in (home, cache, work):
        directory.mkdir()
    population = write_population(work / "population.jsonl", [4, 5, 6])
    config = SimulatorConfig(tokenizer=TOKENIZER_DIR, latency=LatencyConfig(decode_base_ms=2.0))
    with running_simulator(config) as sim:
        request = make_request(
            port=sim.port, artifact_dir=work / "case", population=population, request_count=3
        )
        (work / "request.json").write_text(request.model_dump_json())
        env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(cache)}
        env.pop("XDG_CONFIG_HOME", None)
        env.pop("MPLCONFIGDIR", None)
        done = subprocess.run(
            [sys.executable, "-m", "inferlab_bench", "case", "--input", str(work / "request.json"),
             "--output", str(work / "result.json")],
            cwd=work, env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = BenchClientResult.model_validate_json((work / "result.json").read_bytes())
    assert result.status is ClientStatus.SUCCEEDED, result.error
    check_v6("BenchClientResult", result.model_dump(mode="json"))
    assert files_under(home) == []
    assert any(p.startswith("inferlab/aiperf/dataset_mmap") for p in files_under(cache))
    outside = [p for p in files_under(work) if not p.startswith("case/")]
    assert sorted(outside) == ["population-evidence.jsonl", "population.jsonl", "request.json",
                               "result.json"]  # fmt: skip

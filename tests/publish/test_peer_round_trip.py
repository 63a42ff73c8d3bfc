"""The round trip other tool -> file -> our reader -> our run: GuideLLM 0.8.1 and vLLM 0.33.0
files made by those tools against the simulator (fixtures/README.md says how) are the
baselines of a reproduction against the simulator configured as for their runs, and of a
comparison with AIPerf's own export of our run; each reaches "same within noise"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inferlab_bench.simulator import SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR
from tests.cli.test_human import cli

FIXTURES = Path(__file__).parent / "fixtures"
GUIDELLM = FIXTURES / "guidellm-0.8.1-sweep-c1-c2.json"
VLLM = FIXTURES / "vllm-0.33.0-c2-detailed.json"
MEDIANS = ("p50_ttft_ms", "p50_tpot_ms", "p50_request_latency_ms")
TOLERANCE = "0.15"  # as tests/publish/test_reproduce.py: 10 to 20 ms figures on a busy machine
# Each reproduction is 4 AIPerf runs (2 cases x 2 trials), the sweep 2: about 20 s each when
# the shared machine is loaded.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """The simulator as the fixtures' runs had it: `simulate --model sim --reset-endpoint
    vllm`, default latency model."""
    config = SimulatorConfig(model="sim", tokenizer=TOKENIZER_DIR, reset_endpoints=("vllm",))
    with running_simulator(config) as sim:
        yield sim.base_url


@pytest.fixture(scope="module")
def published(server_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our sweep shaped like the peers' runs (64-token synthetic prompts, 16 output tokens,
    8 requests at c=1 and c=2), bundled."""
    root = tmp_path_factory.mktemp("round-trip")
    proc = cli(
        "sweep",
        *("--url", server_url, "--model", "sim", "--tokenizer", TOKENIZER_DIR),
        *("--random-input-tokens", "64", "--random-output-tokens", "16"),
        *("--concurrency", "1,2", "--requests", "8", "--reset-prefix-cache", "vllm"),
        *("--out", root / "sweep"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    made = cli("bundle", root / "sweep", "--out", root / "sweep.tar.gz")
    assert made.returncode == 0, made.stderr
    return root / "sweep.tar.gz"


def _reproduce(bundle: Path, url: str, out: Path, baseline: Path) -> dict[str, Any]:
    proc = cli(
        "reproduce",
        bundle,
        *("--url", url, "--model", "sim", "--tokenizer", TOKENIZER_DIR),
        *("--out", out, "--trials", "2", "--tolerance", TOLERANCE, "--json"),
        *("--baseline", baseline),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    document: dict[str, Any] = json.loads(proc.stdout)
    return document


def _verdicts(case: dict[str, Any]) -> dict[str, str]:
    return {m["metric"]: m["verdict"] for m in case["metrics"]}


def test_reproduce_against_a_guidellm_081_file_is_same_within_noise(
    published: Path, server_url: str, tmp_path: Path
) -> None:
    guide = _reproduce(published, server_url, tmp_path / "g", GUIDELLM)["baseline"]
    assert guide["source"]["version"] == "0.8.1"
    cases = {c["label"]: c for c in guide["cases"]}
    assert set(cases) == {"c=1", "c=2"}
    for case in cases.values():
        assert case["not_comparable"] == [], case["not_comparable"]
        verdicts = _verdicts(case)
        for metric in MEDIANS:
            assert verdicts[metric] == "same within noise", (case["label"], metric, case)


def test_reproduce_against_a_vllm_bench_serve_file_is_same_within_noise(
    published: Path, server_url: str, tmp_path: Path
) -> None:
    vllm = _reproduce(published, server_url, tmp_path / "v", VLLM)["baseline"]
    cases = {c["label"]: c for c in vllm["cases"]}
    assert "has no benchmark at c=1 (c=2)" in cases["c=1"]["not_comparable"][0]
    verdicts = _verdicts(cases["c=2"])
    for metric in MEDIANS:
        assert verdicts[metric] == "same within noise", (metric, cases["c=2"])


def test_aiperf_export_of_our_own_run_reads_back_as_our_figures(published: Path) -> None:
    case = published.parent / "sweep" / "02-c2"
    export = case / "aiperf" / "profile.json"
    ours = json.loads((case / "result.json").read_text())["metrics"]
    proc = cli("compare", export, case, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    document = json.loads(proc.stdout)
    (source,) = document["baseline"]["cases"]
    assert document["baseline"]["tool"] == "aiperf"
    assert (source["label"], source["model"], source["requests"]) == ("c=2", "sim", 8)
    for metric in ("p50_ttft_ms", "p99_tpot_ms", "mean_request_latency_ms", "output_throughput"):
        assert source["metrics"][metric] == pytest.approx(ours[metric]), metric
    (judged,) = document["cases"]
    for metric in MEDIANS:
        assert _verdicts(judged)[metric] == "same within noise"

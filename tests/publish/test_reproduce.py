"""Publish and reproduce end to end: a real sweep against the simulator, bundled, verified,
tampered with, and reproduced against the same simulator and one with twice the decode time."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import shutil
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from inferlab_bench.layout import RESULT_FILE
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR
from tests.cli.test_human import cli
from tests.publish import browser
from tests.publish.support import DEMO_SAMPLE, prepare_population
from tests.report.test_check import assert_consistent

MODEL = "sim"
FIXTURES = Path(__file__).parent / "fixtures"
GUIDELLM_FIXTURE = FIXTURES / "guidellm-0.8.1-sweep-c1-c2.json"
VLLM_DETAILED = FIXTURES / "vllm-0.33.0-c2-detailed.json"
VLLM_SUMMARY = FIXTURES / "vllm-0.33.0-c1.json"


def _simulator(decode_ms: float) -> SimulatorConfig:
    return SimulatorConfig(
        model=MODEL,
        tokenizer=TOKENIZER_DIR,
        reset_endpoints=("vllm",),
        latency=LatencyConfig(decode_base_ms=decode_ms),
    )


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with running_simulator(_simulator(8.0)) as sim:
        yield sim.base_url


@pytest.fixture(scope="module")
def population(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_population(tmp_path_factory.mktemp("pop"), seed=0)


@pytest.fixture(scope="module")
def published(server_url: str, population: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-point sweep on a frozen population, bundled with its records."""
    root = tmp_path_factory.mktemp("published")
    proc = cli(
        "sweep",
        *("--url", server_url, "--model", MODEL, "--tokenizer", TOKENIZER_DIR),
        *("--population", population, "--concurrency", "1,2", "--requests", "12"),
        *("--reset-prefix-cache", "vllm", "--slo-ttft-ms", "2000", "--out", root / "sweep"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    made = cli("bundle", root / "sweep", "--out", root / "sweep.tar.gz")
    assert made.returncode == 0, made.stderr
    assert "2 case(s)" in made.stdout
    return root / "sweep.tar.gz"


def test_bundle_lists_every_member_with_its_digest(published: Path) -> None:
    proc = cli("bundle", "--verify", published, "--json")
    assert proc.returncode == 0, proc.stderr
    index = json.loads(proc.stdout)
    names = {m["path"] for m in index["members"]}
    for case in ("run/01-c1", "run/02-c2"):
        for name in ("request.json", RESULT_FILE, "validity.json", "records.parquet"):
            assert f"{case}/{name}" in names
    assert {"population/population.jsonl", "population/preparation-manifest.json"} <= names
    assert "report.html" in names  # the bundle carries its page
    prep = index["population"]["preparation"]
    assert prep["seed"] == 0 and len(prep["tokenizer_fingerprint"]) == 64
    assert index["machine"]["cpu_count"] >= 1 and index["versions"]["aiperf_version"]
    assert [c["reset"] for c in index["cases"]] == ["POST:/reset_prefix_cache"] * 2


def test_a_tampered_member_fails_verify_naming_it(published: Path, tmp_path: Path) -> None:
    tampered = tmp_path / "tampered.tar.gz"
    _rewrite(
        published,
        tampered,
        "run/02-c2/result.json",
        lambda b: b.replace(b'"succeeded"', b'"failed"'),
    )
    proc = cli("bundle", "--verify", tampered)
    assert proc.returncode == 1
    assert "member run/02-c2/result.json differs" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_reproduce_on_the_same_server_is_same_within_noise(
    published: Path, server_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "repro"
    proc = cli(
        "reproduce",
        published,
        *("--url", server_url, "--model", MODEL, "--tokenizer", TOKENIZER_DIR),
        *("--out", out, "--trials", "2", "--tolerance", "0.15", "--json"),
        *("--baseline", GUIDELLM_FIXTURE),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    document = json.loads(proc.stdout)
    assert document == json.loads((out / "reproduction.json").read_text())
    verdicts = {
        (case["label"], m["metric"]): m["verdict"]
        for case in document["cases"]
        for m in case["metrics"]
    }
    assert len(verdicts) == 2 * 11  # 9 percentiles + output throughput + goodput per case
    assert set(verdicts.values()) == {"same within noise"}, verdicts
    assert (out / "reproduced" / "run/01-c1" / "trial-02" / "records.parquet").is_file()
    assert assert_consistent(out)["trials_folders"] == 2  # report --check agrees
    against = {c["label"]: c for c in document["baseline"]["cases"]}
    assert document["baseline"]["source"]["tool"] == "guidellm" and set(against) == {"c=1", "c=2"}
    for case in against.values():
        judged = {m["metric"]: m for m in case["metrics"]}
        assert judged["p50_ttft_ms"]["verdict"] != "not comparable"
        assert "against" not in judged["p50_ttft_ms"]["test"]  # GuideLLM keeps every request
        assert "guidellm sent its own prompts, not our population" in case["caveats"]
    _check_page_in_chromium(out, tmp_path)


def test_compare_reads_a_guidellm_file_as_the_baseline(published: Path) -> None:
    proc = cli("compare", GUIDELLM_FIXTURE, published.parent / "sweep", "--json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["baseline"]["version"] == "0.8.1"
    cases = {c["label"]: c for c in document["cases"]}
    assert set(cases) == {"c=1", "c=2"}
    for case in cases.values():
        assert case["not_comparable"] == []
        metrics = {m["metric"]: m for m in case["metrics"]}
        assert metrics["p50_tpot_ms"]["published"] > 0 and metrics["p50_tpot_ms"]["reproduced"] > 0
        assert metrics["output_throughput"]["verdict"] == "not comparable"  # 1 vs 1 trial
    table = cli("compare", GUIDELLM_FIXTURE, published.parent / "sweep")
    assert "guidellm" in table.stdout and "p99_request_latency_ms" in table.stdout


def test_compare_reads_vllm_result_files_as_the_baseline(published: Path) -> None:
    sweep = published.parent / "sweep"
    detailed = json.loads(cli("compare", VLLM_DETAILED, sweep, "--json").stdout)
    cases = {c["label"]: c for c in detailed["cases"]}
    assert detailed["baseline"]["tool"] == "vllm bench serve"
    assert "has no benchmark at c=1 (c=2)" in cases["c=1"]["not_comparable"][0]
    c2 = {m["metric"]: m for m in cases["c=2"]["metrics"]}
    assert c2["p50_tpot_ms"]["verdict"] in ("same within noise", "faster", "slower")
    assert "over per-request records" in c2["p50_tpot_ms"]["test"]  # --save-detailed values
    summary = json.loads(cli("compare", VLLM_SUMMARY, sweep / "01-c1", "--json").stdout)
    (c1,) = summary["cases"]
    tpot = {m["metric"]: m for m in c1["metrics"]}["p90_tpot_ms"]
    assert tpot["published"] == json.loads(VLLM_SUMMARY.read_text())["p90_tpot_ms"]
    assert "against the published figure" in tpot["test"]


def test_the_page_of_a_published_sweep_opens_with_its_plots(
    published: Path, tmp_path: Path
) -> None:
    page = tmp_path / "sweep.html"
    made = cli("report", published.parent / "sweep", "--html", page)
    assert made.returncode == 0, made.stderr
    text = page.read_text()
    assert "the prefix cache was cold when profiling started" in text  # validity in words
    assert "population sha256" in text and "01-c1" in text and "02-c2" in text
    if browser.chromium() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    rendered = browser.render(page, tmp_path, height=3000)
    assert rendered.console == []
    assert 'data-plots-rendered="2"' in rendered.dom  # latency CDFs and sweep curves
    assert browser.plot_pixels(rendered.screenshot) > 1000


def test_a_file_that_is_no_peer_result_is_refused_before_any_run(
    published: Path, server_url: str, tmp_path: Path
) -> None:
    ours = tmp_path / "not-a-peer.json"
    ours.write_text('{"hello": 1}')
    proc = cli(
        "reproduce",
        published,
        *("--url", server_url, "--model", MODEL, "--tokenizer", TOKENIZER_DIR),
        *("--out", tmp_path / "r", "--baseline", ours),
    )
    assert proc.returncode == 1
    assert "not-a-peer.json: not a result file of a tool we read" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r" / "reproduced").exists()


def _check_page_in_chromium(reproduction: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    made = cli("report", reproduction, "--html", page)
    assert made.returncode == 0, made.stderr
    text = page.read_text()
    assert not re.search(r"src=[\"']?http", text) and "href=" not in text  # nothing fetched
    assert text.count("same within noise") >= 22 and "c=1: verdicts" in text
    assert "Against guidellm 0.8.1" in text
    if browser.chromium() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    rendered = browser.render(page, tmp_path)
    assert rendered.console == []
    plots = text.count('<img class="plot"')
    assert plots == 4  # a CDF per case (published and reproduced) + the published sweep's two
    assert f'data-plots-rendered="{plots}"' in rendered.dom
    assert browser.plot_pixels(rendered.screenshot) > 2000


def test_reproduce_against_twice_the_decode_time_is_slower(published: Path, tmp_path: Path) -> None:
    single = tmp_path / "c1.tar.gz"  # one case of the sweep, bundled as a run
    made = cli("bundle", published.parent / "sweep" / "01-c1", "--out", single, "--no-records")
    assert made.returncode == 0, made.stderr
    with running_simulator(_simulator(16.0)) as sim:
        proc = cli(
            "reproduce",
            single,
            *("--url", sim.base_url, "--model", MODEL, "--tokenizer", TOKENIZER_DIR),
            *("--out", tmp_path / "slow", "--trials", "1", "--json"),
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for case in json.loads(proc.stdout)["cases"]:
        verdict = {m["metric"]: m for m in case["metrics"]}
        # The medians: with one trial a side, each is widened by the run-to-run floor measured
        # with a CPU hog (docs/calibration.md); TPOT p90's floor (15%) asks for about +60%.
        for metric in ("p50_tpot_ms", "p50_request_latency_ms"):
            assert verdict[metric]["verdict"] == "slower", verdict[metric]
            # Twice the modeled decode is not twice the measured one on a busy host: the
            # simulator's token sleeps overshoot there, by more at 8 ms than in proportion at
            # 16 ms (issue #33 measured +0.22 with other work running, +0.9 alone). What must
            # hold is the call, and a change well beyond the 5% tolerance that makes it.
            assert verdict[metric]["relative"] > 0.15
            assert "against the published figure" in verdict[metric]["test"]  # no records
        assert verdict["output_throughput"]["verdict"] == "not comparable"  # 1 vs 1 trial
        assert "one trial on each side" in verdict["output_throughput"]["reason"]


CALIBRATED = LatencyConfig(prefill_base_ms=40.0, prefill_ms_per_token=0.1, decode_base_ms=15.0)
"""The server the run-to-run floor was measured on (benchmarks/calibrate.py's): how far a
server's figures move from run to run on a busy host depends on its timings (8 ms token
sleeps jitter by a larger share than 15 ms ones)."""


def test_one_trial_against_one_on_the_same_server_is_same_within_noise(
    population: Path, tmp_path: Path
) -> None:
    """One trial a side shows no run-to-run spread, and the same server differs from run to
    run by more than its requests' spread allows (issue #33: 16-47% of such metrics were
    called faster/slower). The run-to-run floor stands in for it, at the default tolerance."""
    config = SimulatorConfig(
        model=MODEL, tokenizer=TOKENIZER_DIR, reset_endpoints=("vllm",), latency=CALIBRATED
    )
    with running_simulator(config) as sim:
        target = ("--url", sim.base_url, "--model", MODEL, "--tokenizer", TOKENIZER_DIR)
        ran = cli(
            "run",
            *target,
            *("--population", population, "--concurrency", "2", "--requests", "12"),
            *("--reset-prefix-cache", "vllm", "--out", tmp_path / "c2"),
        )
        assert ran.returncode == 0, ran.stderr[-3000:]
        made = cli("bundle", tmp_path / "c2", "--out", tmp_path / "c2.tar.gz")
        assert made.returncode == 0, made.stderr
        proc = cli(
            "reproduce",
            tmp_path / "c2.tar.gz",
            *target,
            *("--out", tmp_path / "again", "--trials", "1", "--json"),
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (case,) = json.loads(proc.stdout)["cases"]
    verdict = {m["metric"]: m for m in case["metrics"]}
    percentiles = {k: v["verdict"] for k, v in verdict.items() if k.startswith("p")}
    assert len(percentiles) == 9 and set(percentiles.values()) == {"same within noise"}, verdict
    assert "run-to-run floor of p50_tpot_ms" in verdict["p50_tpot_ms"]["test"]
    assert "calibration.md" in verdict["p50_tpot_ms"]["test"]


def test_reprepare_with_another_tokenizer_is_refused_naming_it(
    published: Path, server_url: str, tmp_path: Path
) -> None:
    other = tmp_path / "tokenizer"
    shutil.copytree(TOKENIZER_DIR, other)
    config = other / "tokenizer_config.json"
    config.write_text(config.read_text().replace("<|im_start|>", "<|im_start|>", 1) + "\n")
    proc = cli(
        "reproduce",
        published,
        *("--url", server_url, "--model", MODEL, "--tokenizer", other),
        *("--out", tmp_path / "r", "--reprepare", "--dataset", DEMO_SAMPLE),
    )
    assert proc.returncode == 1
    assert "--reprepare: tokenizer differs" in proc.stderr and str(other) in proc.stderr
    assert not (tmp_path / "r" / "reproduced").exists()


def test_reprepare_refuses_a_population_whose_recorded_seed_differs(
    published: Path, server_url: str, tmp_path: Path
) -> None:
    """A bundle whose recorded prepare request says seed 1 for a seed-0 population (its index
    re-signed, so it verifies): the rebuilt population differs and the seed is named."""
    resigned = tmp_path / "resigned.tar.gz"
    _rewrite(
        published,
        resigned,
        "population/prepare-request.json",
        lambda b: b.replace(b'"seed": 0,', b'"seed": 1,'),
        resign=True,
    )
    assert cli("bundle", "--verify", resigned).returncode == 0
    proc = cli(
        "reproduce",
        resigned,
        *("--url", server_url, "--model", MODEL, "--tokenizer", TOKENIZER_DIR),
        *("--out", tmp_path / "r", "--reprepare"),
    )
    assert proc.returncode == 1, proc.stderr
    assert "seed differs (published 0, here 1)" in proc.stderr


def _rewrite(
    source: Path, target: Path, member: str, change: Callable[[bytes], bytes], resign: bool = False
) -> None:
    """Copy an archive with one member's bytes changed; ``resign`` updates BUNDLE.json too."""
    with tarfile.open(source) as old:
        members = {i.name: old.extractfile(i).read() for i in old}  # type: ignore[union-attr]
    changed = change(members[member])
    assert changed != members[member]
    members[member] = changed
    if resign:
        index = json.loads(members["BUNDLE.json"])
        for entry in index["members"]:
            entry["sha256"] = hashlib.sha256(members[entry["path"]]).hexdigest()
        members["BUNDLE.json"] = json.dumps(index).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as new:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            new.addfile(info, io.BytesIO(data))
    target.write_bytes(gzip.compress(buffer.getvalue()))

"""Human commands end to end: sweep, run --trials, report, compare, and their bad flags."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from inferlab_bench.cli import main
from inferlab_bench.cli.outcome import validity_lines
from inferlab_bench.report.rundir import load_case
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR
from tests.report.test_check import assert_consistent
from tests.report.test_plots import assert_nontrivial_png


def cli(*args: str | Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inferlab_bench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def cli_in_process(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    """Flag handling needs no subprocess: run ``main`` here; return (exit code, stderr)."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    config = SimulatorConfig(model="sim", tokenizer=TOKENIZER_DIR, reset_endpoints=("vllm",))
    with running_simulator(config) as sim:
        yield sim.base_url


def common(url: str, out: Path) -> list[str]:
    return [
        "--url",
        url,
        "--model",
        "sim",
        "--tokenizer",
        TOKENIZER_DIR,
        "--random-input-tokens",
        "48",
        "--random-output-tokens",
        "8",
        "--out",
        str(out),
    ]


@pytest.fixture(scope="module")
def sweep_dir(server_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep")
    proc = cli(
        "sweep",
        *common(server_url, out),
        "--concurrency",
        "1,2",
        "--requests",
        "8",
        "--reset-prefix-cache",
        "vllm",
        "--slo-ttft-ms",
        "5000",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "c=1" in proc.stdout and "c=2" in proc.stdout
    return out


def test_sweep_saves_each_case_with_records_and_plots(sweep_dir: Path) -> None:
    index = json.loads((sweep_dir / "sweep.json").read_text())
    assert [c["directory"] for c in index["cases"]] == ["01-c1", "02-c2"]
    for name, concurrency in (("01-c1", 1), ("02-c2", 2)):
        case = sweep_dir / name
        result = json.loads((case / "result.json").read_text())
        request = json.loads((case / "request.json").read_text())
        assert result["status"] == "succeeded", result["error"]
        assert result["completed_requests"] == 8 and result["failed_requests"] == 0
        assert request["case"]["load_shape"]["concurrency"] == concurrency
        assert result["request_slo"]["good_request_ratio"] == 1.0
        table = pq.read_table(case / "records.parquet")
        assert table.num_rows == 8
        assert min(table.column("ttft_ms").to_pylist()) > 0
    assert_nontrivial_png(sweep_dir / "plots" / "latency-cdf.png")
    assert_nontrivial_png(sweep_dir / "plots" / "sweep.png")


def test_report_and_compare_read_the_saved_sweep(sweep_dir: Path) -> None:
    report = cli("report", sweep_dir)
    assert report.returncode == 0, report.stderr
    assert "01-c1" in report.stdout and "02-c2" in report.stdout
    assert "01-c1: validity" in report.stdout and "load_generator_kept_up=" in report.stdout
    assert "plot: " in report.stdout
    saved = json.loads(cli("report", sweep_dir, "--json", "--no-plots").stdout)
    assert set(saved["cases"]) == {"01-c1", "02-c2"}
    assert saved["validity"]["01-c1"]["schema_name"] == "inferlab-validity-v1"
    compare = cli("compare", sweep_dir / "01-c1", sweep_dir / "02-c2")
    assert compare.returncode == 0, compare.stderr
    assert "case.load_shape.concurrency: 1 -> 2" in compare.stdout
    as_json = json.loads(cli("compare", sweep_dir / "01-c1", sweep_dir / "02-c2", "--json").stdout)
    rows = {row["name"]: row for row in as_json["rows"]}
    assert rows["request_throughput"]["b"] > 0 and "p50_ttft_ms" in rows


def test_run_with_trials_reports_confidence_intervals(server_url: str, tmp_path: Path) -> None:
    proc = cli(
        "run",
        *common(server_url, tmp_path),
        "--concurrency",
        "2",
        "--requests",
        "6",
        "--trials",
        "2",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = json.loads((tmp_path / "trials.json").read_text())
    assert trials["succeeded"] == ["trial-01", "trial-02"]
    throughput = next(s for s in trials["summaries"] if s["metric"] == "request_throughput")
    assert throughput["trials"] == 2 and throughput["ci_half_width"] is not None
    printed = json.loads(proc.stdout)
    assert len(printed["cases"]) == 2
    # compare reads the trials folder: means, and Welch's verdict per metric.
    compare = cli("compare", tmp_path, tmp_path, "--json")
    assert compare.returncode == 0, compare.stderr
    judged = json.loads(compare.stdout)
    assert judged["trials"] == [2, 2]
    noise = {n["metric"]: n["noise"] for n in judged["noise"]}
    assert noise["request_throughput"] == "within_noise"  # the same trials on both sides
    report = cli("report", tmp_path, "--no-plots")
    assert report.returncode == 0 and "95% CI, 2 trials" in report.stdout
    table = cli("compare", tmp_path, tmp_path / "trial-01")
    assert "means of 2 vs 1 trials" in table.stdout and "unknown" in table.stdout
    assert assert_consistent(tmp_path)["trials_folders"] == 1  # report --check agrees


def test_strict_fails_a_case_whose_load_generator_fell_behind(tmp_path: Path) -> None:
    """5000 req/s is far beyond what AIPerf sends from two cores: the verdict flips to fail."""
    config = SimulatorConfig(model="sim", tokenizer=TOKENIZER_DIR, latency=LatencyConfig.zero())
    with running_simulator(config) as sim:
        proc = cli(
            "run",
            *common(sim.base_url, tmp_path),
            "--rate",
            "5000",
            "--requests",
            "300",
            "--strict",
        )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "--strict: validity verdict failed: " in proc.stderr
    # The verdict names the dispatch checks that failed, each with its figure and bound (the
    # client's cost fails too when two cores also run the simulator at full tilt).
    assert re.search(r"load_generator_kept_up(, client_cost_low)? \(", proc.stderr)
    assert "(bound " in proc.stderr
    assert "load generator kept up: fail" in proc.stdout  # the detailed lines of one case
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "succeeded"  # a measurement, flagged: not a crashed case
    validity = json.loads((tmp_path / "validity.json").read_text())
    assert validity["verdicts"]["load_generator_kept_up"] == "fail"
    # In a sweep's one line per case, the failed checks follow the verdicts.
    line, *sentences = validity_lines(load_case(tmp_path))
    assert "load_generator_kept_up=fail" in line and "; failed: " in line
    # Under it, each failed verdict's sentence (the client's own cost may fail beside it on a
    # saturated machine), then the steady state's when a client this far behind never settled.
    failed = [n for n, v in validity["verdicts"].items() if v == "fail"]
    expected = ["  " + validity["explanations"][n] for n in failed]
    if validity["steady_state"]["reached"] == "fail":
        expected.append("  " + validity["steady_state"]["sentence"])
    assert sentences == expected
    assert "  " + validity["explanations"]["load_generator_kept_up"] in sentences
    failed = [c["name"] for c in validity["dispatch"]["checks"] if c["verdict"] == "fail"]
    assert failed and all(name in line.split("; failed: ")[1] for name in failed)
    # A damaged validity.json is shown as saved, not a traceback.
    damaged = replace(load_case(tmp_path), validity={**validity, "dispatch": "?"})
    assert validity_lines(damaged) == [line.split("; failed: ")[0]]


def test_a_short_rate_run_writes_every_validity_section_in_words(
    server_url: str, tmp_path: Path
) -> None:
    """The done-when of certified numbers: 40 requests at 6/s, on the simulator."""
    proc = cli("run", *common(server_url, tmp_path), "--rate", "6", "--requests", "40")
    assert proc.returncode == 0, proc.stderr[-3000:]
    validity = json.loads((tmp_path / "validity.json").read_text())
    certification = {m["metric"]: m for m in validity["certification"]}
    p99 = next(c for c in certification["ttft_ms"]["claims"] if c["percentile"] == 99)
    assert not p99["certified"] and p99["needed_samples"] == 662
    assert validity["scheduled_latency"]["applies"]
    assert validity["scheduled_latency"]["basis"] == "planned"
    assert {r["metric"] for r in validity["scheduled_latency"]["latencies"]} == {
        "ttft_ms",
        "request_latency_ms",
    }
    assert validity["steady_state"]["reached"] == "unknown"  # 40 requests: too few to tell
    assert set(validity["explanations"]) == set(validity["verdicts"])
    # On screen: p99 starred, the star explained in words, each section in a sentence.
    assert "*" in proc.stdout and "not certified: too few requests" in proc.stdout
    out = " ".join(proc.stdout.split())
    assert "p99 needs 662" in out
    assert "latency from the scheduled send: " in out and "steady state: Not judged" in out


def test_run_against_a_dead_server_fails_with_a_saved_result(tmp_path: Path) -> None:
    proc = cli(
        "run", *common("http://127.0.0.1:9", tmp_path), "--concurrency", "1", "--requests", "2"
    )
    assert proc.returncode == 1
    assert "inferlab-bench: error:" in proc.stderr and "Traceback" not in proc.stderr
    assert json.loads((tmp_path / "result.json").read_text())["status"] == "failed"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "give exactly one of --concurrency, --rate, --unbounded"),
        (["--concurrency", "1", "--rate", "2"], "--concurrency cannot be combined with --rate"),
        (["--concurrency", "1", "--burstiness", "2"], "--burstiness needs --rate"),
        (["--concurrency", "1", "--request-body", "[1]"], "--request-body: expected a JSON object"),
    ],
)
def test_run_bad_flags_give_one_line_errors(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = cli_in_process(
        capsys, "run", *common("http://127.0.0.1:9", tmp_path), "--requests", "2", *extra
    )
    assert code == 2
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_run_needs_a_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = [
        "run",
        "--url",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--tokenizer",
        tmp_path,
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--out",
        tmp_path,
    ]
    code, err = cli_in_process(capsys, *base)
    assert code == 2 and "give exactly one of --population, --random-input-tokens" in err
    code, err = cli_in_process(capsys, *base, "--population", tmp_path / "none.jsonl")
    assert code == 2 and "--population: expected an existing file" in err
    population = tmp_path / "population.jsonl"
    population.write_text('{"output_length": 4}\n')
    code, err = cli_in_process(capsys, *base, "--population", population)
    assert code == 2 and "1 entry, but --requests 2 needs 2" in err
    population.write_text('{"output_length": 4}\n' * 2)
    code, err = cli_in_process(capsys, *base, "--population", population)
    assert code == 2 and "--prepare-request" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--concurrency", "1,x"], "--concurrency: expected an integer (found 'x')"),
        (["--concurrency", "0,2"], "--concurrency: expected an integer >= 1 (found '0')"),
        (["--rate", "a"], "--rate: expected a number (found 'a')"),
        ([], "give exactly one of --concurrency, --rate"),
    ],
)
def test_sweep_bad_load_lists(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = cli_in_process(
        capsys, "sweep", *common("http://127.0.0.1:9", tmp_path), "--requests", "2", *extra
    )
    assert code == 2 and message in err


def test_missing_required_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = cli_in_process(capsys, "run", "--concurrency", "1")
    assert code == 2 and "required" in err


def test_report_and_compare_on_nothing_fail_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = cli_in_process(capsys, "report", tmp_path)
    assert code == 1 and "no result.json" in err
    code, err = cli_in_process(capsys, "compare", tmp_path / "a", tmp_path / "b")
    assert code == 2 and "A: expected an existing file or directory" in err
    (tmp_path / "a").mkdir()
    code, err = cli_in_process(capsys, "compare", tmp_path / "a", tmp_path / "a")
    assert code == 1 and "cannot read saved result" in err

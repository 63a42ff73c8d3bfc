"""``report --check``: a real trials folder passes; each planted inconsistency is caught."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from inferlab_bench.capacity.judge import INVALIDATING
from inferlab_bench.cli import main
from inferlab_bench.report import check, tables
from inferlab_bench.simulator import SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR

pytestmark = pytest.mark.timeout(300)


def report_check(folder: Path) -> tuple[int, dict[str, Any]]:
    """``report --check --json`` in process: its exit code and document."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["report", str(folder), "--check", "--json"])
    assert "Traceback" not in err.getvalue()
    return code, json.loads(out.getvalue())


def assert_consistent(folder: Path) -> dict[str, Any]:
    """What the e2e tests call on the folders they write."""
    code, found = report_check(folder)
    assert code == 0 and found["status"] == "consistent", found["findings"]
    return found


@pytest.fixture(scope="module")
def trials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A real ``run --trials 2`` with an SLO against the simulator (6 requests a trial, after
    2 of warmup: AIPerf then writes its phase manifest)."""
    out = tmp_path_factory.mktemp("trials")
    config = SimulatorConfig(model="sim", tokenizer=TOKENIZER_DIR)
    with running_simulator(config) as sim:
        argv = [
            *("run", "--url", sim.base_url, "--model", "sim", "--tokenizer", TOKENIZER_DIR),
            *("--random-input-tokens", "32", "--random-output-tokens", "8"),
            *("--concurrency", "2", "--requests", "6", "--warmup", "2", "--trials", "2"),
            *("--slo-ttft-ms", "5000", "--out", str(out), "--json"),
        ]
        sink = io.StringIO()
        with redirect_stdout(sink), redirect_stderr(sink):
            assert main(argv) == 0, sink.getvalue()[-3000:]
    yield out


@pytest.fixture
def copy(trials: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(trials, target)
    return target


def edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def checks_failed(folder: Path) -> set[str]:
    code, found = report_check(folder)
    assert code == 1 and found["status"] == "inconsistent"
    return {f["check"] for f in found["findings"]}


def test_a_real_trials_folder_is_consistent(trials: Path) -> None:
    found = assert_consistent(trials)
    assert found["cases"] == 2 and found["trials_folders"] == 1


def test_goodput_above_good_over_window_is_caught(copy: Path) -> None:
    def double(result: dict[str, Any]) -> None:
        result["request_slo"]["goodput"] *= 2

    edit(copy / "trial-01" / "result.json", double)
    assert checks_failed(copy) == {"goodput_within_throughput"}


def test_more_good_than_completed_is_caught(copy: Path) -> None:
    def more(result: dict[str, Any]) -> None:
        slo = result["request_slo"]
        slo["good_requests"] = result["completed_requests"] + 1
        slo["goodput"] = slo["good_requests"] / slo["profiling_duration_seconds"]

    edit(copy / "trial-02" / "result.json", more)
    assert checks_failed(copy) == {"goodput_within_throughput"}


def test_goodput_above_throughput_is_explained_by_the_two_durations(trials: Path) -> None:
    """On a few requests all good, goodput (over the request window) prints above AIPerf's
    throughput (over its whole profiling phase): the check says why instead of failing."""
    _, found = report_check(trials)
    for note in found["notes"]:
        assert "only because each has its own duration" in note
        assert "AIPerf's whole profiling phase" in note


def test_a_throughput_on_another_duration_is_caught(copy: Path) -> None:
    def halve(result: dict[str, Any]) -> None:
        result["metrics"]["request_throughput"] /= 2

    edit(copy / "trial-01" / "result.json", halve)
    manifest = copy / "trial-01" / "aiperf" / "phase_manifest.json"
    assert manifest.is_file()
    # The trials' saved mean no longer matches either: both are found.
    assert checks_failed(copy) == {"goodput_within_throughput", "trials_mean"}
    manifest.unlink()  # without the phase's own length: too long for the request window
    assert checks_failed(copy) == {"goodput_within_throughput", "trials_mean"}


def test_a_percentile_without_its_certification_is_caught(copy: Path) -> None:
    def drop(validity: dict[str, Any]) -> None:
        for metric in validity["certification"]:
            metric["claims"] = [c for c in metric["claims"] if c["percentile"] != 99.0]

    edit(copy / "trial-01" / "validity.json", drop)
    _, found = report_check(copy)
    messages = [f["message"] for f in found["findings"]]
    assert "p99_ttft_ms is printed but validity.json has no claim for it" in messages


def test_a_terminal_that_drops_the_stars_is_caught(
    trials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A regression of the renderer: the table forgets the uncertified marks.
    monkeypatch.setattr(tables, "_marked", lambda text, *_: text)
    _, found = report_check(trials)
    shown = [f for f in found["findings"] if f["check"] == "percentiles_certified"]
    assert shown and all("not starred" in f["message"] for f in shown)


def test_a_trials_mean_that_is_not_the_trials_is_caught(copy: Path) -> None:
    def shift(listing: dict[str, Any]) -> None:
        listing["summaries"][0]["mean"] *= 1.5

    edit(copy / "trials.json", shift)
    assert checks_failed(copy) == {"trials_mean"}


def _capacity(folder: Path, valid: bool, answer: dict[str, Any]) -> None:
    probes = [{"number": 1, "directory": "trial-01", "valid": valid, "counted": valid}]
    document = {"status": "succeeded", "planner": {"name": "smooth_isotonic"}}
    (folder / "capacity.json").write_text(
        json.dumps({**document, "probes": probes, "answer": answer})
    )


def test_capacity_verdicts_must_be_the_folders(copy: Path) -> None:
    # The real trial is a valid folder only when the host let it be: under a CPU hog per core
    # (load average 23) its load_generator_kept_up failed and the first check below found the
    # table's "valid" wrong. The premise is set, as the last step sets its opposite.
    def all_pass(validity: dict[str, Any]) -> None:
        validity["verdicts"] = {name: "pass" for name in validity["verdicts"]}

    edit(copy / "trial-01" / "validity.json", all_pass)
    answer = {"capacity": 2, "attainment_at_capacity": 1.0, "goodput_at_capacity": 3.0}
    _capacity(copy, valid=True, answer=answer)
    assert report_check(copy)[0] == 0
    _capacity(copy, valid=False, answer=answer)  # the table calls a valid folder invalid
    assert checks_failed(copy) == {"capacity_verdicts"}

    def cold_fails(validity: dict[str, Any]) -> None:
        validity["verdicts"]["cache_cold"] = "fail"

    _capacity(copy, valid=True, answer=answer)
    edit(copy / "trial-01" / "validity.json", cold_fails)  # and now the other way round
    assert checks_failed(copy) == {"capacity_verdicts"}


def test_a_capacity_without_its_goodput_is_caught(copy: Path) -> None:
    _capacity(copy, valid=True, answer={"capacity": 2, "attainment_at_capacity": 1.0})
    code, found = report_check(copy)
    assert code == 1
    assert [f["message"] for f in found["findings"]] == [
        "capacity found but goodput_at_capacity is empty"
    ]


def test_the_invalidating_verdicts_are_capacitys() -> None:
    assert check.CAPACITY_INVALIDATING == INVALIDATING


def test_terminal_output_names_each_finding(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(copy / "trials.json", lambda listing: listing["summaries"][0].update(mean=-1.0))
    assert main(["report", str(copy), "--check"]) == 1
    out = capsys.readouterr().out
    assert "INCONSISTENT trials_mean" in out and "2 inconsistencies" in out  # mean, interval


def test_a_folder_with_nothing_saved_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path), "--check"]) != 0
    err = capsys.readouterr().err
    assert "no result.json or capacity.json" in err and "Traceback" not in err

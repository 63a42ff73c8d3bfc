"""The JSON-mode CLI as the control plane calls it: always a schema-valid result, exit 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SchemaCheck
from tests.protocol import examples


def run_cli(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inferlab_bench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def read_result(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


FORMS = {
    "case": (["case"], "BenchClientResult"),
    "legacy-case": ([], "BenchClientResult"),
    "prepare": (["prepare"], "BenchDatasetPreparationResult"),
    "legacy-prepare": (["--prepare"], "BenchDatasetPreparationResult"),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_bad_json_gives_failed_result_and_exit_zero(
    form: str, tmp_path: Path, check_v6: SchemaCheck
) -> None:
    prefix, definition = FORMS[form]
    request = tmp_path / "req.json"
    request.write_text("{ this is not json")
    output = tmp_path / "out" / "result.json"
    proc = run_cli(*prefix, "--input", request, "--output", output)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    result = read_result(output)
    check_v6(definition, result)
    assert result["status"] == "failed"
    assert "not valid JSON" in result["error"]


@pytest.mark.parametrize("form", ["case", "prepare"])
def test_missing_request_file_names_the_path(
    form: str, tmp_path: Path, check_v6: SchemaCheck
) -> None:
    prefix, definition = FORMS[form]
    output = tmp_path / "result.json"
    proc = run_cli(*prefix, "--input", tmp_path / "nope.json", "--output", output)
    assert proc.returncode == 0
    result = read_result(output)
    check_v6(definition, result)
    assert result["status"] == "failed"
    assert "nope.json" in result["error"] and "cannot read" in result["error"]


def test_unknown_field_is_named_in_case_result(tmp_path: Path, check_v6: SchemaCheck) -> None:
    data = examples.case_request(examples.LOAD_SHAPES[1])
    data["case"]["ramp"] = 3
    request = tmp_path / "req.json"
    request.write_text(json.dumps(data))
    output = tmp_path / "result.json"
    proc = run_cli("case", "--input", request, "--output", output)
    assert proc.returncode == 0
    result = read_result(output)
    check_v6("BenchClientResult", result)
    assert result["status"] == "failed"
    assert "case.ramp" in result["error"]


def test_invalid_prepare_request_echoes_what_it_can(tmp_path: Path, check_v6: SchemaCheck) -> None:
    data = examples.prep_request()
    data["protocol_version"] = "5"
    request = tmp_path / "req.json"
    request.write_text(json.dumps(data))
    output = tmp_path / "result.json"
    assert run_cli("prepare", "--input", request, "--output", output).returncode == 0
    result = read_result(output)
    check_v6("BenchDatasetPreparationResult", result)
    assert result["status"] == "failed"
    assert result["requested_entries"] == 64
    assert result["materialization_identity"] == "sharegpt-single-request-v1"
    assert "protocol_version" in result["error"]


def test_unwritable_output_exits_nonzero_with_reason(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = run_cli("case", "--input", tmp_path / "x.json", "--output", blocker / "result.json")
    assert proc.returncode == 1
    assert "cannot write result" in proc.stderr


def test_result_write_leaves_no_temp_files(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    run_cli("case", "--input", tmp_path / "x.json", "--output", out_dir / "result.json")
    assert [p.name for p in out_dir.iterdir()] == ["result.json"]


@pytest.mark.parametrize("args", [["handshake"], ["--handshake"]])
def test_handshake_reports_versions(args: list[str]) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert facts["protocol_version"] == "6"
    assert facts["aiperf_version"] == facts["aiperf_pinned_version"] == "0.13.0"
    assert facts["client"] == "inferlab-bench"

"""Before a run starts: a request count too small for its SLO or its concurrency is said."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferlab_bench.cli import main
from inferlab_bench.runs.advice import run_size_advice
from tests.case.support import TOKENIZER_DIR, make_request

SLO = {"ttft_ms": 500.0, "minimum_good_request_ratio": 0.99}


def test_too_few_requests_for_the_slo_and_the_concurrency_are_both_named(tmp_path: Path) -> None:
    shape = {"kind": "concurrency_limited", "concurrency": 8}
    request = make_request(
        port=9, artifact_dir=tmp_path, load_shape=shape, request_count=20, slo=SLO
    )
    slo_line, slots_line = run_size_advice(request)
    assert "cannot certify the SLO at p99" in slo_line and "at least 459" in slo_line
    assert "below 5x the concurrency 8" in slots_line and "40 or more" in slots_line


def test_enough_requests_get_no_advice(tmp_path: Path) -> None:
    shape = {"kind": "concurrency_limited", "concurrency": 4}
    request = make_request(
        port=9, artifact_dir=tmp_path, load_shape=shape, request_count=500, slo=SLO
    )
    assert run_size_advice(request) == []
    for shape in (
        {"kind": "request_rate_limited", "request_rate": 5.0},
        {"kind": "unbounded_request_rate"},  # every request at once by design
    ):
        request = make_request(port=9, artifact_dir=tmp_path, load_shape=shape)
        assert run_size_advice(request) == []


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_strict_refuses_the_run_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--url", "http://127.0.0.1:9", "--model", "m", "--tokenizer", TOKENIZER_DIR,
            "--random-input-tokens", "16", "--random-output-tokens", "4", "--concurrency", "4",
            "--requests", "8", "--out", str(tmp_path / "out")]  # fmt: skip
    code, err = run_cli(capsys, *args, "--strict")
    assert code == 2 and len(err.splitlines()) == 1
    assert "below 5x the concurrency 4" in err and not (tmp_path / "out").exists()
    # Without --strict it is a warning, and the run goes ahead (here to a dead server).
    code, err = run_cli(capsys, *args)
    assert code == 1 and "inferlab-bench: warning: --requests 8 is below 5x" in err

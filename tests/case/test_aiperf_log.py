"""AIPerf's reason for failing is quoted in words, not as a box border or a traceback."""

from __future__ import annotations

from pathlib import Path

from inferlab_bench.case.aiperf_log import failure_reason


def test_the_error_box_body_is_the_reason(tmp_path: Path) -> None:
    log = tmp_path / "aiperf-output.log"
    log.write_text(
        "starting\n"
        "╭─ Error Running AIPerf System ─────────────────────────╮\n"
        "│ benchmark.models.items.0.name                         │\n"
        "│   String should have at least 1 character             │\n"
        "╰───────────────────────────────────────────────────────╯\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
    )
    assert failure_reason(log) == (
        "benchmark.models.items.0.name String should have at least 1 character"
    )


def test_a_logged_error_line_when_there_is_no_box(tmp_path: Path) -> None:
    log = tmp_path / "aiperf-output.log"
    log.write_text("info line\n12:00:01 ERROR    Worker failed: connection refused\nlast\n")
    assert "Worker failed: connection refused" in failure_reason(log)


def test_a_missing_log_says_so(tmp_path: Path) -> None:
    assert failure_reason(tmp_path / "none.log") == "no output"

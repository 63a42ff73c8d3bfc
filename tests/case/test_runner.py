"""The AIPerf runner's output pump (case/runner.py): it outlives a run that stopped waiting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from inferlab_bench.case.runner import _pump


def test_the_pump_stops_quietly_when_the_run_closed_its_log(tmp_path: Path) -> None:
    # A child that keeps printing after the run gave up on the pump and closed the log: on a
    # loaded host AIPerf's group held the pipe past the bounded join, and the pump's next
    # write raised "I/O operation on closed file" in its thread.
    script = "import time\nfor i in range(50):\n    print(i, flush=True)\n    time.sleep(0.01)\n"
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    log = (tmp_path / "aiperf.log").open("w")
    log.close()
    try:
        _pump(process, log, None)  # returns; before, ValueError escaped
    finally:
        process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()


def test_the_pump_copies_every_line_to_the_log_and_the_echo(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", "print('a'); print('b')"], stdout=subprocess.PIPE, text=True
    )
    echo_path = tmp_path / "echo.txt"
    with (tmp_path / "aiperf.log").open("w") as log, echo_path.open("w") as echo:
        _pump(process, log, echo)
    process.wait()
    assert process.stdout is not None
    process.stdout.close()
    assert (tmp_path / "aiperf.log").read_text() == "a\nb\n"
    assert echo_path.read_text() == "a\nb\n"

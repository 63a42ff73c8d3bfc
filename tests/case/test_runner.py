"""The AIPerf runner's output pump (case/runner.py): it outlives a run that stopped waiting, and
tells the deadline which phase AIPerf's log reached."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from inferlab_bench.case.runner import STARTING, STARTING_HINT, _pump, phase_of
from inferlab_bench.interrupts import DEADLINE_HINT, Guard


def test_the_pump_stops_quietly_when_the_run_closed_its_log(tmp_path: Path) -> None:
    # A child that keeps printing after the run gave up on the pump and closed the log: on a
    # loaded host AIPerf's group held the pipe past the bounded join, and the pump's next
    # write raised "I/O operation on closed file" in its thread.
    script = "import time\nfor i in range(50):\n    print(i, flush=True)\n    time.sleep(0.01)\n"
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    log = (tmp_path / "aiperf.log").open("w")
    log.close()
    try:
        _pump(process, log, None, Guard("case", None))  # returns; before, ValueError escaped
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
        _pump(process, log, echo, Guard("case", None))
    process.wait()
    assert process.stdout is not None
    process.stdout.close()
    assert (tmp_path / "aiperf.log").read_text() == "a\nb\n"
    assert echo_path.read_text() == "a\nb\n"


# Lines as AIPerf 0.13 prints them (aiperf-output.log of a capacity probe).
CONFIGURING = (
    "05:46:08.087 INFO     System state: initializing -> configuring (system_controller.py:700)"
)
PROFILING = "05:48:37.101 INFO     System state: ready -> profiling (system_controller.py:700)"
PROCESSING = (
    "05:48:40.020 INFO     System state: profiling -> processing (system_controller.py:700)"
)
STOPPING = "05:46:42.674 INFO     System state: configuring -> stopping (system_controller.py:700)"


def test_aiperfs_states_name_the_phase_a_deadline_reports() -> None:
    assert phase_of(CONFIGURING) == (STARTING, STARTING_HINT)
    assert phase_of(PROFILING) == ("AIPerf was running", DEADLINE_HINT)
    assert phase_of(STOPPING) is None  # our own stop keeps the phase it interrupted
    assert phase_of("05:46:13.312 INFO     Configuring tokenizer(s) for dataset manager") is None
    assert phase_of("System state: ") is None


def test_the_pump_moves_the_guard_from_starting_to_running(tmp_path: Path) -> None:
    lines = [CONFIGURING, PROFILING, PROCESSING, STOPPING]
    script = "".join(f"print({line!r})\n" for line in lines)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    guard = Guard("case", None, doing=STARTING, hint=STARTING_HINT)
    loads: list[str] = []  # the bookkeeping is lowered from here on, not during start-up
    ends: list[str] = []  # and given its priority back for the records
    with (tmp_path / "aiperf.log").open("w") as log:
        _pump(
            process,
            log,
            None,
            guard,
            lambda: loads.append(guard.doing),
            lambda: ends.append(guard.doing),
        )
    process.wait()
    assert process.stdout is not None
    process.stdout.close()
    assert guard.doing == "AIPerf was processing its records"  # stopping keeps it
    assert loads == ["AIPerf was running"] and ends == ["AIPerf was processing its records"]

"""The one subprocess: ``aiperf profile --config FILE`` with a hard deadline and clean stops."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from inferlab_bench.atomic import fresh_text_file
from inferlab_bench.errors import LoadGeneratorError

INTERRUPT_GRACE_SECONDS = 8.0
TERMINATE_GRACE_SECONDS = 4.0


@dataclass(frozen=True)
class RunOutcome:
    """How the AIPerf process ended."""

    command: list[str]
    exit_code: int | None
    timed_out: bool
    interrupted: bool
    """We received SIGTERM/SIGINT and stopped AIPerf."""
    duration: float
    started_ns: int
    log_path: Path


def aiperf_command(config_path: Path) -> list[str]:
    """The exact command line: AIPerf's CLI module in this same Python environment."""
    return [sys.executable, "-m", "aiperf", "profile", "--config", str(config_path)]


def run_aiperf(
    config_path: Path,
    *,
    log_path: Path,
    deadline: float,
    env: Mapping[str, str],
    echo: IO[str] | None = None,
) -> RunOutcome:
    """Run AIPerf until it exits, ``deadline`` (monotonic) passes, or we are told to stop.

    Output goes to ``log_path`` and to ``echo`` (stderr by default). On the deadline or a
    SIGTERM the whole process group gets SIGINT (AIPerf's own clean stop), then SIGTERM,
    then SIGKILL.
    """
    command = aiperf_command(config_path)
    started_ns, clock = time.time_ns(), time.monotonic()
    with _stop_requests() as stop, fresh_text_file(log_path) as log:
        process = _spawn(command, env)
        pump = threading.Thread(target=_pump, args=(process, log, echo or sys.stderr), daemon=True)
        pump.start()
        timed_out = _wait(process, deadline, stop)
        interrupted = stop.is_set()
        if process.poll() is None:
            _stop_group(process)
        pump.join(timeout=5)
    return RunOutcome(
        command=command,
        exit_code=process.returncode,
        timed_out=timed_out,
        interrupted=interrupted,
        duration=time.monotonic() - clock,
        started_ns=started_ns,
        log_path=log_path,
    )


def _spawn(command: list[str], env: Mapping[str, str]) -> subprocess.Popen[str]:
    try:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env=dict(env),
            start_new_session=True,  # its own process group: we stop AIPerf and its children
        )
    except OSError as exc:
        raise LoadGeneratorError(f"cannot start AIPerf ({command[0]}): {exc}") from exc


def _wait(process: subprocess.Popen[str], deadline: float, stop: threading.Event) -> bool:
    """Wait for exit; True when the deadline passed first."""
    while process.poll() is None:
        if stop.is_set():
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return True
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=min(remaining, 0.2))
    return False


def _stop_group(process: subprocess.Popen[str]) -> None:
    for sig, grace in (
        (signal.SIGINT, INTERRUPT_GRACE_SECONDS),
        (signal.SIGTERM, TERMINATE_GRACE_SECONDS),
        (signal.SIGKILL, None),
    ):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    # Children that outlived AIPerf's main process (workers, services) go too.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _pump(process: subprocess.Popen[str], log: IO[str], echo: IO[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        log.write(line)
        with contextlib.suppress(OSError, ValueError):
            echo.write(line)
    log.flush()


@contextlib.contextmanager
def _stop_requests() -> Iterator[threading.Event]:
    """An event set by SIGTERM/SIGINT while AIPerf runs (main thread only)."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous: dict[signal.Signals, Any] = {}

    def handler(signum: int, frame: object) -> None:
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        previous[signum] = signal.signal(signum, handler)
    try:
        yield stop
    finally:
        for restored, old in previous.items():
            signal.signal(restored, old)

"""The one subprocess: ``aiperf profile --config FILE`` with a hard deadline and clean stops."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from inferlab_bench.atomic import fresh_text_file
from inferlab_bench.case.aiperf_plugin.priorities import BookkeepingPolicy, BookkeepingPriorities
from inferlab_bench.case.usage import UsageSampler, UsageSeries
from inferlab_bench.errors import LoadGeneratorError
from inferlab_bench.interrupts import DEADLINE_HINT, Guard

INTERRUPT_GRACE_SECONDS = 8.0
"""At most this long for AIPerf's own clean stop (SIGINT) when time allows."""
TERMINATE_GRACE_SECONDS = 4.0

STARTING = "AIPerf was still starting (no request sent yet)"
RUNNING = "AIPerf was running"
PROCESSING = "AIPerf was processing its records"
STARTING_HINT = (
    "nothing reached the server: AIPerf had not finished starting, which on a busy host "
    "takes over a minute; raise the budget"
)
"""Measured on 2 cores, from its config written to its first request: 14 s at load average 2
(a CPU hog per core), 17 to 85 s (11 runs) at load average 15 to 18 (hogs and other runs)."""
_STATE_LINE = "System state: "
_PHASES = {
    "initializing": (STARTING, STARTING_HINT),
    "configuring": (STARTING, STARTING_HINT),
    "ready": (STARTING, STARTING_HINT),
    "profiling": (RUNNING, DEADLINE_HINT),
    "processing": (PROCESSING, "raise the budget or lower request_count"),
}
"""AIPerf's system states (its log's ``System state: A -> B`` lines) as the phase a deadline
message names; stopping and shutdown follow our own stop and keep the phase it interrupted."""


def phase_of(line: str) -> tuple[str, str] | None:
    """(what AIPerf is doing, the hint if the deadline passes now) from one line of its log;
    None when the line is not a state change we name."""
    at = line.find(_STATE_LINE)
    if at < 0:
        return None
    _, arrow, state = line[at + len(_STATE_LINE) :].partition("->")
    return _PHASES.get(state.split()[0].lower()) if arrow and state.split() else None


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
    usage: UsageSeries | None = None
    """AIPerf's CPU time and the host's run queue while it ran (None: not on Linux)."""


def aiperf_command(config_path: Path) -> list[str]:
    """The exact command line: AIPerf's CLI module in this same Python environment."""
    return [sys.executable, "-m", "aiperf", "profile", "--config", str(config_path)]


def run_aiperf(
    config_path: Path,
    *,
    log_path: Path,
    guard: Guard,
    stop_at: float,
    env: Mapping[str, str],
    echo: IO[str] | None = None,
    bookkeeping: BookkeepingPolicy = "equal",
    runnable_before: int | None = None,
) -> RunOutcome:
    """Run AIPerf until it exits, ``stop_at`` (monotonic) passes, or the guard fires.

    Output goes to ``log_path`` and to ``echo`` (nowhere else when None). When we stop it,
    the whole process group gets SIGINT (AIPerf's own clean stop), then SIGTERM, then
    SIGKILL, with graces that fit in what is left of the guard's deadline.
    """
    command = aiperf_command(config_path)
    started_ns, clock = time.time_ns(), time.monotonic()
    with guard.deferred() as stop, fresh_text_file(log_path) as log:
        process = _spawn(command, env)
        # AIPerf leads its own process group, so its services and workers are all in it;
        # its bookkeeping services yield as ``bookkeeping`` says, lowered as the sampler
        # finds them.
        priorities = BookkeepingPriorities(
            process.pid, bookkeeping, from_load=True, runnable=runnable_before
        )
        sampler = (
            UsageSampler(
                process.pid, on_scan=priorities.lower_new, nice=priorities.sampler_nice
            ).start()
            if UsageSampler.available()
            else None
        )
        # Until AIPerf says it is profiling, a deadline is its start-up's, not the server's:
        # on a busy host it can take the whole budget before one request is sent.
        guard.doing, guard.hint = STARTING, STARTING_HINT
        pump = threading.Thread(
            target=_pump,
            args=(process, log, echo, guard, priorities.begin_load, priorities.end_load),
            daemon=True,
        )
        pump.start()
        timed_out = _wait(process, stop_at, stop)
        interrupted = stop.is_set() and not guard.deadline_passed
        timed_out = timed_out or guard.deadline_passed
        if process.poll() is None:
            _stop_group(process, _grace(guard))
        pump.join(timeout=max(0.1, min(5.0, guard.remaining())))
        usage = sampler.stop() if sampler is not None else None
        if usage is not None:
            usage = dataclasses.replace(usage, niced=priorities.as_json())
    return RunOutcome(
        command=command,
        exit_code=process.returncode,
        timed_out=timed_out,
        interrupted=interrupted,
        duration=time.monotonic() - clock,
        started_ns=started_ns,
        log_path=log_path,
        usage=usage,
    )


def _grace(guard: Guard) -> float:
    """Seconds the stop may take: AIPerf's clean stop when there is time, less when not."""
    return max(0.5, min(INTERRUPT_GRACE_SECONDS + TERMINATE_GRACE_SECONDS, guard.remaining()))


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
            # Its own process group, so we stop AIPerf and its children together, but in our
            # session: a new session is a new scheduler autogroup, which the kernel weighs
            # against a server we started as one task, so the bookkeeping services' nice and
            # SCHED_IDLE would yield only to AIPerf's own sender and never to that server.
            process_group=0,
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


def _stop_group(process: subprocess.Popen[str], grace: float) -> None:
    """SIGINT, then SIGTERM, then SIGKILL to the group, within ``grace`` seconds in all."""
    share = INTERRUPT_GRACE_SECONDS / (INTERRUPT_GRACE_SECONDS + TERMINATE_GRACE_SECONDS)
    for sig, wait in (
        (signal.SIGINT, grace * share),
        (signal.SIGTERM, grace * (1 - share)),
        (signal.SIGKILL, None),
    ):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # Children that outlived AIPerf's main process (workers, services) go too.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _pump(
    process: subprocess.Popen[str],
    log: IO[str],
    echo: IO[str] | None,
    guard: Guard,
    on_load: Callable[[], None] | None = None,
    on_load_end: Callable[[], None] | None = None,
) -> None:
    """Copy AIPerf's output to the log (and the echo), following its phase: the guard names it,
    ``on_load`` is called when the load starts (the bookkeeping is lowered from then) and
    ``on_load_end`` when AIPerf turns to processing its records (its priority given back)."""
    assert process.stdout is not None
    try:
        for line in process.stdout:
            phase = phase_of(line)
            if phase is not None:
                guard.doing, guard.hint = phase
                if phase[0] == RUNNING and on_load is not None:
                    on_load()
                if phase[0] == PROCESSING and on_load_end is not None:
                    on_load_end()
            log.write(line)
            if echo is not None:
                with contextlib.suppress(OSError, ValueError):
                    echo.write(line)
        log.flush()
    except ValueError:
        # The run closed its log after waiting its bounded time for us: a process of AIPerf's
        # group still held the pipe (seen on a loaded host). What it printed after that is
        # dropped; raising here would only surface as an exception in a stray thread.
        return

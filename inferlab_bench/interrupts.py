"""SIGTERM, SIGINT and a stage's hard deadline, turned into our errors for the stage's whole life.

A stage runs inside ``guard(...)``. Whatever it is doing when a signal arrives (a download,
tokenization, an HTTP reset, reading records), the signal raises ``InterruptedStageError``
there, and when the deadline passes ``DeadlineExceededError`` is raised the same way (a
SIGALRM timer), so the stage's own ``except InferlabError`` writes a failed result and
temporary files are cleaned by their ``finally`` blocks. Code that must stop a child in
order (AIPerf's process group, a Kubernetes job) runs inside ``Guard.deferred()``: there a
signal or the deadline only sets ``Guard.stop`` and the code polls it.

Handlers can only be installed from the main thread; elsewhere (a test calling a stage in a
thread) the guard still carries the deadline for polling code, and signals keep their
defaults.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from inferlab_bench.errors import DeadlineExceededError, InterruptedStageError, StoppedError

_SIGNALS = (signal.SIGTERM, signal.SIGINT)

MAX_BUDGET_SECONDS = 1e9
"""The longest deadline a guard keeps (about 31 years). The protocol allows any finite
positive budget, but the interval timer holds about 9.2e9 s (``setitimer`` raised
OverflowError for 1e10 and beyond), and asyncio timers and AIPerf's timeout are no better:
a longer budget is taken as this one, which no case outlives."""


def clamped(budget_seconds: float) -> float:
    """``budget_seconds``, at most ``MAX_BUDGET_SECONDS``."""
    return min(budget_seconds, MAX_BUDGET_SECONDS)


DEADLINE_HINT = "raise the budget or lower request_count; the server may be stalling"


@dataclass
class Guard:
    """What stopped the stage (if anything), and whether raising is deferred right now."""

    what: str
    """The stage, for messages: ``case``, ``prepare``."""
    deadline: float | None
    """Monotonic time by which the stage must end (None: no deadline)."""
    budget: float | None = None
    """The budget in seconds, as the user gave it."""
    budget_field: str = "budget"
    """What the budget is called where the user set it (``case_budget_seconds``)."""
    started: float = field(default_factory=time.monotonic)
    doing: str = "starting"
    """What the stage is doing now, for messages (``AIPerf was running``)."""
    hint: str = DEADLINE_HINT
    """What to do when the deadline passes while doing that (see ``AIPERF_STARTING_HINT``)."""
    stop: threading.Event = field(default_factory=threading.Event)
    reason: str | None = None
    """``SIGTERM``, ``SIGINT`` or ``deadline`` once stopped."""
    _deferring: int = 0

    @property
    def deadline_passed(self) -> bool:
        return self.reason == "deadline"

    def remaining(self) -> float:
        """Seconds until the deadline (inf without one)."""
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    @contextlib.contextmanager
    def deferred(self) -> Iterator[threading.Event]:
        """Inside, a signal or the deadline only sets the event; raise on the way out if set."""
        self._deferring += 1
        try:
            yield self.stop
        finally:
            self._deferring -= 1

    def stopped(self, reason: str) -> StoppedError:
        """Record that ``reason`` stopped the stage (if nothing did before) and say so."""
        if self.reason is None:
            self.reason = reason
        return self.error()

    def error(self) -> StoppedError:
        """The error that says why the stage stopped."""
        elapsed = time.monotonic() - self.started
        if self.reason == "deadline":
            budget = "" if self.budget is None else f" {self.budget:g}"
            return DeadlineExceededError(
                f"{self.budget_field}{budget} ran out while {self.doing} "
                f"({elapsed:.1f} s into the {self.what}); it was stopped",
                hint=self.hint,
            )
        return InterruptedStageError(
            f"{self.what} interrupted by a signal ({self.reason}) while {self.doing}, "
            f"after {elapsed:.1f} s",
            hint="the artifacts written so far are listed in raw_artifacts",
        )

    def raise_if_stopped(self) -> None:
        if self.reason is not None:
            raise self.error()

    def _fire(self, reason: str) -> None:
        first = self.reason is None
        if first:
            self.reason = reason
        self.stop.set()
        # Raise only for the first stop: a second signal while the failed result is being
        # written must not cut it short (deferred code raises the first one itself).
        if first and self._deferring == 0:
            raise self.error()


_active: list[Guard] = []
"""The guards in force, innermost last: a signal stops the innermost one."""


_owner: list[int] = []
"""The pid that installed the handlers: a forked child (a pool worker) inherits them, but
the stage is not its to stop, so there the signal gets its default action."""


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _owner and os.getpid() != _owner[0]:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if _active:
        _active[-1]._fire(signal.Signals(signum).name)


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    timed = [g for g in _active if g.deadline is not None]
    if timed:
        timed[-1]._fire("deadline")


@contextlib.contextmanager
def guard(
    what: str, budget_seconds: float | None = None, *, budget_field: str = "budget"
) -> Iterator[Guard]:
    """Run ``what`` with SIGTERM/SIGINT (and, with a budget, its deadline) raised as errors.

    Guards nest: a command guards its whole life (parsing the request, writing the result)
    and the stage inside it adds its budget; a signal stops the innermost guard.
    """
    deadline = None if budget_seconds is None else time.monotonic() + clamped(budget_seconds)
    state = Guard(what, deadline, budget_seconds, budget_field)
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    previous: dict[int, Any] = {}
    if not _active:
        _owner[:] = [os.getpid()]
        for signum in _SIGNALS:
            previous[signum] = signal.signal(signum, _on_signal)
        previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, _on_alarm)
    _active.append(state)
    if deadline is not None:
        signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 1e-3))
    try:
        yield state
    finally:
        _active.remove(state)
        _arm_outer_timer()
        for number, handler in previous.items():
            signal.signal(number, handler)


def _arm_outer_timer() -> None:
    deadlines = [g.deadline for g in _active if g.deadline is not None]
    left = (deadlines[-1] - time.monotonic()) if deadlines else 0.0
    signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3) if deadlines else 0.0)

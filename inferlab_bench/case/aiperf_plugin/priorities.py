"""AIPerf's bookkeeping services lowered in priority while the load runs (from outside AIPerf).

A request's send coincides with the previous request's record going through AIPerf's record
processor and records manager; on a host shared with the server they then hold a core the
server or the sender wants. Each bookkeeping service (``BOOKKEEPING_SERVICES``) is found by
its process title once it has named itself, and every one of its threads is lowered as the
policy says. The runner hands ``BookkeepingPriorities.lower_new`` to the usage sampler, which
calls it after each scan of the process group (docs/case.md, "What we change in AIPerf").
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

PROC = Path("/proc")
BOOKKEEPING_NICE = 10
BOOKKEEPING_SERVICES = ("records_manager", "record_processor", "dataset_manager", "worker_manager")
"""AIPerf services off the timing path: they handle records and datasets after the fact.
The sender (worker), the credit issuer (timing_manager) and the message router
(system_controller) keep their priority."""
BookkeepingPolicy = Literal["equal", "nice", "idle"]
"""How AIPerf's bookkeeping services yield to its sender: not at all, ``nice`` +10, or
``nice`` +10 under ``SCHED_IDLE`` (a core only when nothing else wants it)."""
SHARED_HOST_CORES = 4
"""At most this many cores: AIPerf's sender, its credit issuer and a server on the same host
already want most of them, so under a light load bookkeeping gets only what is left."""


def choose_bookkeeping(
    cores: int, concurrency: int | None, runnable: int | None = None
) -> BookkeepingPolicy:
    """The bookkeeping policy for a load of ``concurrency`` (None: a rate) on ``cores``, with
    ``runnable`` other tasks wanting a core as AIPerf starts (None: not known).

    On a small host (``SHARED_HOST_CORES``) under a light concurrency load (at most two
    requests per core) they run ``idle``: only on a core nothing else wants. Under heavier or
    rate loads they keep ``nice`` +10, since ``idle`` cost about 0.7% of achieved throughput
    at c=16 on 2 cores (docs/case.md). A host already busy (at least one other runnable task
    per core) has no core nothing else wants: there ``idle`` starved the bookkeeping outright
    (beside a CPU hog per core in the caller's session, AIPerf's records were never processed
    and, lowered during start-up, its dataset manager used up AIPerf's 300 s configuration
    timeout loading the tokenizer), so it keeps ``nice`` +10.
    """
    light = concurrency is not None and concurrency <= 2 * cores
    quiet = runnable is None or runnable < cores
    return "idle" if cores <= SHARED_HOST_CORES and light and quiet else "nice"


def service_title(pid: int, proc: Path = PROC) -> str | None:
    """The AIPerf service a process runs (``aiperf record_processor_1a2b3c4d`` -> its name)."""
    try:
        cmdline = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    found = _TITLE.match(cmdline.replace(b"\0", b" ").decode(errors="replace").strip())
    return found.group(1) if found else None


_TITLE = re.compile(r"aiperf (\w+?)(?:_[0-9a-f]{4,})?(?:\s|$)")


class BookkeepingPriorities:
    """Lowers the bookkeeping services of AIPerf's process group ``group`` as ``policy`` says."""

    def __init__(
        self,
        group: int,
        policy: BookkeepingPolicy,
        *,
        from_load: bool = False,
        runnable: int | None = None,
    ) -> None:
        self._group = group
        self.policy: BookkeepingPolicy = policy
        self._runnable = runnable
        self._load = threading.Event()
        """Set once the load starts (``begin_load``); nothing is lowered before, with
        ``from_load``: AIPerf's start-up (the dataset manager loading the tokenizer) is
        timed by nobody, and lowered it only took longer on a busy host."""
        if not from_load:
            self._load.set()
        self._ended = False
        self._restored = 0
        self._judged: set[int] = set()
        self._services: list[str] = []
        self._lowered: set[int] = set()  # bookkeeping processes whose threads are lowered
        self._threads: set[int] = set()

    @property
    def sampler_nice(self) -> int:
        """The nice of a thread that watches AIPerf for us (it is bookkeeping too)."""
        return 0 if self.policy == "equal" else BOOKKEEPING_NICE

    def begin_load(self) -> None:
        """The load has started: lower from the next scan on."""
        self._load.set()

    def end_load(self) -> None:
        """The load has ended: AIPerf's records are what is left, and nothing is timed any
        more. Lowered, they took longer than the budget beside a CPU hog per core (a case of
        4 requests ran out of 120 s while AIPerf processed its records), so every lowered
        thread gets our own priority back where the kernel lets us (raising a nice value back,
        or leaving SCHED_IDLE, needs CAP_SYS_NICE or RLIMIT_NICE room), and none is lowered
        after."""
        self._ended = True
        nice = os.getpriority(os.PRIO_PROCESS, 0)
        for tid in sorted(self._threads):
            try:
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except OSError:  # gone, or not ours to raise
                continue
            self._restored += 1

    def lower_new(self, pids: Iterable[int]) -> None:
        """Judge the group's processes not yet judged; lower every thread of each bookkeeping
        service not yet lowered (a thread it started since is lowered too)."""
        if self.policy == "equal" or not self._load.is_set() or self._ended:
            return
        for pid in set(pids) - self._judged:
            title = service_title(pid)
            if title is None or title == "system_controller" and pid != self._group:
                continue  # a child not yet renamed after its fork: judge it next time
            self._judged.add(pid)
            if title in BOOKKEEPING_SERVICES:
                self._lowered.add(pid)
                self._services.append(title)
        for pid in list(self._lowered):
            self._lower_threads(pid)

    def as_json(self) -> dict[str, Any]:
        """What was lowered, as ``client-usage.json`` records it under ``niced``."""
        return {
            "policy": self.policy,
            "services": sorted(set(self._services)),
            "nice": 0 if self.policy == "equal" else BOOKKEEPING_NICE,
            "scheduler": "SCHED_IDLE" if self.policy == "idle" else "SCHED_OTHER",
            "threads": len(self._threads),
            "host_runnable_before": self._runnable,
            "threads_restored_after_load": self._restored,
        }

    def _lower_threads(self, pid: int) -> None:
        """Every thread of ``pid`` not yet lowered: nice and the scheduler policy are per
        thread on Linux, and ZeroMQ's I/O thread (which wakes on every record) or a thread
        started later would otherwise keep the default priority."""
        try:
            threads = [int(t) for t in os.listdir(PROC / str(pid) / "task")]
        except OSError:
            self._lowered.discard(pid)  # it has exited
            return
        for tid in threads:
            if tid in self._threads:
                continue
            try:
                _lower(tid, self.policy)
            except OSError:
                continue
            self._threads.add(tid)


def equal_json() -> dict[str, Any]:
    """``niced`` of a run whose bookkeeping kept its priority."""
    return BookkeepingPriorities(0, "equal").as_json()


def _lower(tid: int, policy: BookkeepingPolicy) -> None:
    """One thread (Linux applies both calls to the thread whose id is given)."""
    if policy == "idle":  # allowed without privileges for one's own processes
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    os.setpriority(os.PRIO_PROCESS, tid, BOOKKEEPING_NICE)

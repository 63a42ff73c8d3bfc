"""The load generator's own cost, sampled from /proc while it runs: CPU time and the run queue.

A thread reads, every ``interval`` seconds, the CPU time (user + system) of every process in
AIPerf's process group (our runner starts it as a group leader, so its workers and services
are all in it) and the host's ``procs_running`` from /proc/stat. The samples are timestamped on
the wall clock, as AIPerf's records are, so the validity checks can cut out the load window.
Linux only; elsewhere nothing is sampled and the figures are unknown.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

DEFAULT_INTERVAL_SECONDS = 0.2
RESCAN_EVERY = 5
"""Samples from one scan of all of /proc for the group's new processes to the next; in
between only the known ones are read. A scan costs 1.5-3.5 ms of CPU on 2 cores, and
``perf sched`` showed it holding a core a server on the same host had just been woken on
(up to 2.4 ms of that server's wait, 2026-12-06)."""
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
_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class UsageSeries:
    """Samples of one run: wall-clock times, cumulative CPU seconds, runnable tasks."""

    time_ns: tuple[int, ...] = ()
    cpu_seconds: tuple[float, ...] = ()
    """CPU time of the group's processes so far (a process that exited keeps its last)."""
    runnable: tuple[int, ...] = ()
    """Host-wide tasks running or waiting for a core, this sampler's own thread excluded."""
    processes: int = 0
    """Distinct processes seen in the group."""
    niced: tuple[str, ...] = ()
    """AIPerf services whose priority was lowered while the load ran (see ``policy``)."""
    host_cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    policy: BookkeepingPolicy = "equal"
    niced_threads: int = 0
    """Threads of those services lowered (every one of each: its ZeroMQ I/O thread too)."""
    autogroup: str | None = None
    """The scheduler autogroup AIPerf ran in (``/autogroup-42``, ``/`` the root group; None:
    a kernel without autogroups)."""
    caller_autogroup: str | None = field(default_factory=lambda: autogroup_of("self"))

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": 4,
            "host_cores": self.host_cores,
            "autogroup": {
                "enabled": autogroups_enabled(),
                "aiperf": self.autogroup,
                "caller": self.caller_autogroup,
            },
            "processes": self.processes,
            "niced": {
                "policy": self.policy,
                "services": list(self.niced),
                "nice": 0 if self.policy == "equal" else BOOKKEEPING_NICE,
                "scheduler": "SCHED_IDLE" if self.policy == "idle" else "SCHED_OTHER",
                "threads": self.niced_threads,
            },
            "time_ns": list(self.time_ns),
            "cpu_seconds": list(self.cpu_seconds),
            "runnable": list(self.runnable),
        }


def choose_bookkeeping(cores: int, concurrency: int | None) -> BookkeepingPolicy:
    """The bookkeeping policy for a load of ``concurrency`` (None: a rate) on ``cores``.

    A request's send coincides with the previous request's record going through AIPerf's
    record processor and records manager. On a small host (``SHARED_HOST_CORES``) under a
    light concurrency load (at most two requests per core) they run ``idle``: only on a
    core nothing else wants. Under heavier or rate loads they keep ``nice`` +10, since
    ``idle`` cost about 0.7% of achieved throughput at c=16 on 2 cores (docs/case.md).
    """
    light = concurrency is not None and concurrency <= 2 * cores
    return "idle" if cores <= SHARED_HOST_CORES and light else "nice"


def group_cpu_seconds(
    group: int, seen: dict[int, float], proc: Path = PROC, known: Iterable[int] | None = None
) -> float:
    """CPU seconds of every process in process group ``group``; ``seen`` keeps exited ones'
    last value.

    ``known``: read only these processes (no scan of /proc for new ones).
    """
    entries = proc.iterdir() if known is None else (proc / str(pid) for pid in known)
    for entry in entries:
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry / "stat")
        if fields is None or int(fields[2]) != group:
            continue
        seen[int(entry.name)] = (int(fields[11]) + int(fields[12])) / _TICKS_PER_SECOND
    return sum(seen.values())


def procs_running(proc: Path = PROC) -> int | None:
    """``procs_running`` of /proc/stat: tasks on a core or waiting for one, the reader included."""
    try:
        text = (proc / "stat").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("procs_running "):
            return int(line.split()[1])
    return None


def autogroup_of(pid: int | str, proc: Path = PROC) -> str | None:
    """The scheduler autogroup of ``pid`` (``/autogroup-42``), None without the file.

    With autogroups on, the kernel shares the cores between sessions (``setsid``) first and
    between the threads of a session only within its share, so a thread's nice and
    ``SCHED_IDLE`` only order it against threads of its own session. A process of a session
    that never got an autogroup (init's, often a container's first one) is in the root group,
    which the kernel leaves unnamed (an empty file): ``/``.
    """
    try:
        text = (proc / str(pid) / "autogroup").read_text()
    except OSError:
        return None
    return text.split()[0] if text.strip() else "/"


def autogroups_enabled(proc: Path = PROC) -> bool | None:
    """``kernel.sched_autogroup_enabled`` (None: a kernel without autogroups)."""
    try:
        return (proc / "sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return None


def is_this_host(host: str) -> bool | None:
    """Whether ``host`` is an address of this machine (None: it does not resolve).

    Loopback is; any other address is when a socket can be bound to it, which only an
    address of one of this machine's interfaces allows. Nothing is sent anywhere.
    """
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    for family, _, _, _, address in infos:
        ip = str(address[0]).split("%")[0]
        if ipaddress.ip_address(ip).is_loopback:
            return True
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((ip, 0))
            return True
        except OSError:
            continue
    return False


def _stat_fields(path: Path) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold spaces)."""
    try:
        text = path.read_bytes()
    except OSError:
        return None
    close = text.rfind(b")")
    return text[close + 2 :].decode().split() if close >= 0 else None


def service_title(pid: int, proc: Path = PROC) -> str | None:
    """The AIPerf service a process runs (``aiperf record_processor_1a2b3c4d`` -> its name)."""
    try:
        cmdline = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    found = _TITLE.match(cmdline.replace(b"\0", b" ").decode(errors="replace").strip())
    return found.group(1) if found else None


_TITLE = re.compile(r"aiperf (\w+?)(?:_[0-9a-f]{4,})?(?:\s|$)")


class UsageSampler:
    """Samples a process group's CPU time and the run queue in a thread until ``stop``.

    Unless ``policy`` is ``equal``, each AIPerf bookkeeping service (``BOOKKEEPING_SERVICES``)
    is lowered as ``policy`` says as soon as it has named itself: on a machine shared with
    the server, work on finished records then waits for the server and the sender instead
    of delaying the next request.
    """

    def __init__(
        self,
        group: int,
        interval: float = DEFAULT_INTERVAL_SECONDS,
        *,
        policy: BookkeepingPolicy = "equal",
    ) -> None:
        self._group = group
        self._policy: BookkeepingPolicy = policy
        self._judged: set[int] = set()
        self._niced: list[str] = []
        self._samples = 0
        self._lowered: set[int] = set()  # bookkeeping processes whose threads are lowered
        self._lowered_threads: set[int] = set()
        self._autogroup: str | None = None
        self._interval = interval
        self._stop = threading.Event()
        self._seen: dict[int, float] = {}
        self._times: list[int] = []
        self._cpu: list[float] = []
        self._runnable: list[int] = []
        self._thread = threading.Thread(target=self._loop, name="usage-sampler", daemon=True)

    @staticmethod
    def available() -> bool:
        return (PROC / "stat").is_file()

    def start(self) -> UsageSampler:
        # Read once: a process keeps the autogroup it was started in (AIPerf leads no
        # session of its own, see ``runner._spawn``), and a kernel without them has none.
        self._autogroup = autogroup_of(self._group)
        self._thread.start()
        return self

    def stop(self) -> UsageSeries:
        """Take a last sample, end the thread and return the series."""
        self._stop.set()
        self._thread.join(timeout=5.0)
        return UsageSeries(
            tuple(self._times),
            tuple(self._cpu),
            tuple(self._runnable),
            processes=len(self._seen),
            niced=tuple(sorted(set(self._niced))),
            policy=self._policy,
            niced_threads=len(self._lowered_threads),
            autogroup=self._autogroup,
        )

    def _loop(self) -> None:
        if self._policy != "equal":  # this thread is bookkeeping too
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BOOKKEEPING_NICE)
        while True:
            self._sample()
            if self._stop.wait(self._interval):
                self._sample(scan=True)
                return

    def _sample(self, scan: bool = False) -> None:
        running = procs_running()
        scan = scan or self._samples % RESCAN_EVERY == 0
        self._samples += 1
        known = None if scan else list(self._seen)
        cpu = group_cpu_seconds(self._group, self._seen, known=known)
        if self._policy != "equal" and scan:  # new processes and threads show up in a scan
            self._lower_bookkeeping()
        if running is None:
            return
        self._times.append(time.time_ns())
        self._cpu.append(cpu)
        self._runnable.append(max(0, running - 1))

    def _lower_bookkeeping(self) -> None:
        for pid in self._seen.keys() - self._judged:
            title = service_title(pid)
            if title is None or title == "system_controller" and pid != self._group:
                continue  # a child not yet renamed after its fork: judge it next time
            self._judged.add(pid)
            if title in BOOKKEEPING_SERVICES:
                self._lowered.add(pid)
                self._niced.append(title)
        for pid in list(self._lowered):
            self._lower_threads(pid)

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
            if tid in self._lowered_threads:
                continue
            try:
                _lower(tid, self._policy)
            except OSError:
                continue
            self._lowered_threads.add(tid)


def _lower(tid: int, policy: BookkeepingPolicy) -> None:
    """One thread (Linux applies both calls to the thread whose id is given)."""
    if policy == "idle":  # allowed without privileges for one's own processes
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    os.setpriority(os.PRIO_PROCESS, tid, BOOKKEEPING_NICE)

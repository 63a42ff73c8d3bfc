"""The load generator's own cost, sampled from /proc while it runs: CPU time and the run queue.

A thread reads, every ``interval`` seconds, the CPU time (user + system) of every process in
AIPerf's process group (our runner starts it as a group leader, so its workers and services
are all in it) and the host's ``procs_running`` from /proc/stat. The samples are timestamped on
the wall clock, as AIPerf's records are, so the validity checks can cut out the load window.
Linux only; elsewhere nothing is sampled and the figures are unknown. It only measures:
what we change in AIPerf (its bookkeeping's priority among it) is ``aiperf_plugin``'s, called
through ``on_scan``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_INTERVAL_SECONDS = 0.2
RESCAN_EVERY = 5
"""Samples from one scan of all of /proc for the group's new processes to the next; in
between only the known ones are read. A scan costs 1.5-3.5 ms of CPU on 2 cores, and
``perf sched`` showed it holding a core a server on the same host had just been woken on
(up to 2.4 ms of that server's wait, 2026-12-06)."""
PROC = Path("/proc")
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
    host_cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    niced: dict[str, Any] = field(default_factory=dict)
    """What was lowered in AIPerf while the load ran (``aiperf_plugin.priorities``)."""
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
            "niced": self.niced,
            "time_ns": list(self.time_ns),
            "cpu_seconds": list(self.cpu_seconds),
            "runnable": list(self.runnable),
        }


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


ScanHook = Callable[[Iterable[int]], None]
"""Called from the sampler's thread after each scan with every process of the group seen."""


class UsageSampler:
    """Samples a process group's CPU time and the run queue in a thread until ``stop``.

    ``on_scan`` is called after each full scan of /proc (new processes show up only in one)
    with the group's processes; ``nice``: the sampler thread's own nice (it runs beside the
    load it measures).
    """

    def __init__(
        self,
        group: int,
        interval: float = DEFAULT_INTERVAL_SECONDS,
        *,
        on_scan: ScanHook | None = None,
        nice: int = 0,
    ) -> None:
        self._group = group
        self._on_scan = on_scan
        self._nice = nice
        self._samples = 0
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
            autogroup=self._autogroup,
        )

    def _loop(self) -> None:
        if self._nice:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self._nice)
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
        if scan and self._on_scan is not None:
            self._on_scan(list(self._seen))
        if running is None:
            return
        self._times.append(time.time_ns())
        self._cpu.append(cpu)
        self._runnable.append(max(0, running - 1))

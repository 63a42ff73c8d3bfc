"""Sampling the load generator's cost from /proc: a real process tree, the real run queue."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from inferlab_bench.case.usage import (
    UsageSampler,
    autogroup_of,
    autogroups_enabled,
    group_cpu_seconds,
    is_this_host,
    procs_running,
)

pytestmark = pytest.mark.skipif(not UsageSampler.available(), reason="needs Linux /proc")

BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_the_sampler_counts_a_process_group_and_its_children() -> None:
    """A group leader that sleeps, with a child that burns 0.6 s of CPU: the child's time
    is counted (it is in the group) and kept after it exits."""
    code = (
        "import subprocess, sys, time\n"
        f"subprocess.run([sys.executable, '-c', {BURN.format(s=0.6)!r}])\n"
        "time.sleep(0.5)\n"
    )
    leader = subprocess.Popen([sys.executable, "-c", code], process_group=0)
    sampler = UsageSampler(leader.pid, interval=0.05).start()
    leader.wait(timeout=30)
    series = sampler.stop()
    assert series.processes >= 2
    assert 0.5 <= series.cpu_seconds[-1] <= 1.5
    assert list(series.cpu_seconds) == sorted(series.cpu_seconds)  # cumulative
    assert len(series.time_ns) == len(series.runnable) >= 5
    assert series.as_json()["host_cores"] == (os.cpu_count() or 1)


def test_a_process_outside_the_group_is_not_counted() -> None:
    burner = subprocess.Popen([sys.executable, "-c", BURN.format(s=0.4)])
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(0.8)"], process_group=0
    )
    sampler = UsageSampler(sleeper.pid, interval=0.05).start()
    sleeper.wait(timeout=30)
    burner.wait(timeout=30)
    time.sleep(0.05)
    assert sampler.stop().cpu_seconds[-1] < 0.2


def test_between_scans_only_the_known_processes_are_read() -> None:
    """A full scan of /proc costs milliseconds on a small host: between scans the sampler
    reads only the processes it knows, so a new one is counted from the next scan on."""
    # It says when its 0.3 s of CPU are burnt: a fixed 1 s wait saw only 0.16 s burnt under a
    # CPU hog per core (load average 15 on 2 cores).
    burnt = "print('burnt', flush=True)\nimport time; time.sleep(60)"
    leader = subprocess.Popen(
        [sys.executable, "-c", BURN.format(s=0.3) + burnt],
        process_group=0,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert leader.stdout is not None
    try:
        assert leader.stdout.readline() == "burnt\n"
        seen: dict[int, float] = {}
        assert group_cpu_seconds(leader.pid, seen, known=[]) == 0.0 and seen == {}
        assert group_cpu_seconds(leader.pid, seen) >= 0.2 and list(seen) == [leader.pid]
        assert group_cpu_seconds(leader.pid, seen, known=list(seen)) >= 0.2
    finally:
        leader.kill()
        leader.wait()
        leader.stdout.close()


def test_the_sampler_thread_takes_the_nice_it_is_given() -> None:
    leader = subprocess.Popen(["sleep", "2"], process_group=0)
    try:
        sampler = UsageSampler(leader.pid, interval=0.05, nice=10).start()
        time.sleep(0.2)
        thread = next(t for t in threading.enumerate() if t.name == "usage-sampler")
        assert thread.native_id is not None
        assert os.getpriority(os.PRIO_PROCESS, thread.native_id) == 10
        assert os.getpriority(os.PRIO_PROCESS, 0) != 10  # the caller keeps its own
        sampler.stop()
    finally:
        leader.kill()
        leader.wait()


def test_run_queue_and_host_addresses() -> None:
    running = procs_running()
    assert running is not None and running >= 1  # this reader at least
    assert is_this_host("127.0.0.1") is True and is_this_host("localhost") is True
    # TEST-NET-1 (RFC 5737) is nobody's interface address: nothing can be bound to it.
    assert is_this_host("192.0.2.1") is False
    assert is_this_host("no-such-host.invalid") is None


def test_the_autogroups_of_aiperf_and_of_the_caller_are_recorded() -> None:
    """A group leader in our session shares our scheduler autogroup; one that leads a session
    of its own (as AIPerf did before 2026-12-06) is in another, and the record says so."""
    ours = autogroup_of("self")
    for own_session in (False, True):
        leader = subprocess.Popen(
            ["sleep", "2"],
            process_group=None if own_session else 0,
            start_new_session=own_session,
        )
        try:
            sampler = UsageSampler(leader.pid, interval=0.05).start()
            time.sleep(0.15)
            recorded = sampler.stop().as_json()["autogroup"]
        finally:
            leader.kill()
            leader.wait()
        assert recorded["enabled"] == autogroups_enabled() and recorded["caller"] == ours
        if ours is None:
            assert recorded["aiperf"] is None  # a kernel without autogroups
        else:  # "/" when we are in init's session (CI's runner): the root group
            assert (recorded["aiperf"] == ours) is not own_session


def test_a_process_of_the_root_autogroup_reads_as_the_root(tmp_path: Path) -> None:
    """The kernel writes nothing for a task in the root autogroup (init's session, which a
    container's commands often share): that is the root group "/", not "no autogroups"."""
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "autogroup").write_text("")
    (tmp_path / "8").mkdir()
    (tmp_path / "8" / "autogroup").write_text("/autogroup-1917 nice 0\n")
    assert autogroup_of(7, proc=tmp_path) == "/"
    assert autogroup_of(8, proc=tmp_path) == "/autogroup-1917"
    assert autogroup_of(9, proc=tmp_path) is None  # no file: a kernel without autogroups


def test_each_scan_hands_the_group_s_processes_to_the_hook() -> None:
    """What we change in AIPerf hooks in here (aiperf_plugin.priorities): the hook sees the
    group's processes, a child started later included, and never one outside the group."""
    code = "import subprocess, time\ntime.sleep(0.3)\nsubprocess.run(['sleep', '1'])\n"
    outsider = subprocess.Popen(["sleep", "2"])
    leader = subprocess.Popen([sys.executable, "-c", code], process_group=0)
    seen: list[set[int]] = []
    try:
        sampler = UsageSampler(leader.pid, interval=0.02, on_scan=lambda p: seen.append(set(p)))
        sampler.start()
        time.sleep(0.9)
        sampler.stop()
    finally:
        for p in (leader, outsider):
            p.kill()
            p.wait()
    assert len(seen) >= 3 and all(leader.pid in pids for pids in seen)
    assert max(len(pids) for pids in seen) >= 2  # the child, from a later scan on
    assert all(outsider.pid not in pids for pids in seen)

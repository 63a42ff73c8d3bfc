"""Sampling the load generator's cost from /proc: a real process tree, the real run queue."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from inferlab_bench.case.usage import (
    SHARED_HOST_CORES,
    UsageSampler,
    choose_bookkeeping,
    is_this_host,
    procs_running,
    session_cpu_seconds,
)

pytestmark = pytest.mark.skipif(not UsageSampler.available(), reason="needs Linux /proc")

BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_the_sampler_counts_a_session_and_its_children() -> None:
    """A session leader that sleeps, with a child that burns 0.6 s of CPU: the child's time
    is counted (it is in the session) and kept after it exits."""
    code = (
        "import subprocess, sys, time\n"
        f"subprocess.run([sys.executable, '-c', {BURN.format(s=0.6)!r}])\n"
        "time.sleep(0.5)\n"
    )
    leader = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    sampler = UsageSampler(leader.pid, interval=0.05).start()
    leader.wait(timeout=30)
    series = sampler.stop()
    assert series.processes >= 2
    assert 0.5 <= series.cpu_seconds[-1] <= 1.5
    assert list(series.cpu_seconds) == sorted(series.cpu_seconds)  # cumulative
    assert len(series.time_ns) == len(series.runnable) >= 5
    assert series.as_json()["host_cores"] == (os.cpu_count() or 1)


def test_a_process_outside_the_session_is_not_counted() -> None:
    burner = subprocess.Popen([sys.executable, "-c", BURN.format(s=0.4)])
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(0.8)"], start_new_session=True
    )
    sampler = UsageSampler(sleeper.pid, interval=0.05).start()
    sleeper.wait(timeout=30)
    burner.wait(timeout=30)
    time.sleep(0.05)
    assert sampler.stop().cpu_seconds[-1] < 0.2


def test_between_scans_only_the_known_processes_are_read() -> None:
    """A full scan of /proc costs milliseconds on a small host: between scans the sampler
    reads only the processes it knows, so a new one is counted from the next scan on."""
    leader = subprocess.Popen(
        [sys.executable, "-c", BURN.format(s=0.3) + "import time; time.sleep(2)"],
        start_new_session=True,
    )
    try:
        time.sleep(1.0)
        seen: dict[int, float] = {}
        assert session_cpu_seconds(leader.pid, seen, known=[]) == 0.0 and seen == {}
        assert session_cpu_seconds(leader.pid, seen) >= 0.2 and list(seen) == [leader.pid]
        assert session_cpu_seconds(leader.pid, seen, known=list(seen)) >= 0.2
    finally:
        leader.kill()
        leader.wait()


def test_the_sampler_thread_itself_is_niced_under_a_policy() -> None:
    leader = subprocess.Popen(["sleep", "2"], start_new_session=True)
    try:
        sampler = UsageSampler(leader.pid, interval=0.05, policy="nice").start()
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


def test_bookkeeping_services_are_niced_and_the_sender_is_not() -> None:
    """Processes titled as AIPerf titles its services (argv[0], as setproctitle leaves it)."""
    leader = subprocess.Popen(
        ["aiperf record_processor_1a2b3c4d", "3"], executable="/bin/sleep", start_new_session=True
    )
    sender = subprocess.Popen(["aiperf worker_9f8e7d6c", "3"], executable="/bin/sleep")
    try:
        sampler = UsageSampler(leader.pid, interval=0.05, policy="nice").start()
        time.sleep(0.3)
        series = sampler.stop()
        assert os.getpriority(os.PRIO_PROCESS, leader.pid) == 10
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, sender.pid) == ours  # not in the session
        assert series.niced == ("record_processor",)
        assert series.as_json()["niced"] == {
            "policy": "nice",
            "services": ["record_processor"],
            "nice": 10,
            "scheduler": "SCHED_OTHER",
            "threads": 1,
        }
        assert os.sched_getscheduler(leader.pid) == os.SCHED_OTHER
    finally:
        for p in (leader, sender):
            p.kill()
            p.wait()


def test_idle_bookkeeping_runs_under_sched_idle_and_is_recorded() -> None:
    """On a small host the bookkeeping services get a core only when nothing else wants it."""
    leader = subprocess.Popen(
        ["aiperf records_manager", "3"], executable="/bin/sleep", start_new_session=True
    )
    try:
        sampler = UsageSampler(leader.pid, interval=0.05, policy="idle").start()
        time.sleep(0.3)
        series = sampler.stop()
        assert os.sched_getscheduler(leader.pid) == os.SCHED_IDLE
        assert os.getpriority(os.PRIO_PROCESS, leader.pid) == 10
        assert os.sched_getscheduler(0) != os.SCHED_IDLE  # the sampler itself is untouched
        recorded = series.as_json()["niced"]
        assert recorded["policy"] == "idle" and recorded["scheduler"] == "SCHED_IDLE"
        assert recorded["services"] == ["records_manager"]
    finally:
        leader.kill()
        leader.wait()


def test_every_thread_of_a_bookkeeping_service_is_lowered_also_one_started_later() -> None:
    """Nice and the scheduler are per thread: a service's ZeroMQ I/O thread (started before
    the service names itself) and a thread it starts mid-run are lowered with it."""
    code = (
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(4,)).start()\n"
        "time.sleep(0.6)\n"
        "threading.Thread(target=time.sleep, args=(4,)).start()\n"
        "time.sleep(4)\n"
    )
    leader = subprocess.Popen(
        ["aiperf records_manager", "-c", code], executable=sys.executable, start_new_session=True
    )
    try:
        sampler = UsageSampler(leader.pid, interval=0.05, policy="idle").start()
        time.sleep(1.2)
        threads = [int(t) for t in os.listdir(f"/proc/{leader.pid}/task")]
        series = sampler.stop()
        assert len(threads) == 3
        assert all(os.sched_getscheduler(t) == os.SCHED_IDLE for t in threads)
        assert all(os.getpriority(os.PRIO_PROCESS, t) == 10 for t in threads)
        assert series.as_json()["niced"]["threads"] == 3
    finally:
        leader.kill()
        leader.wait()


def test_equal_policy_leaves_every_service_alone() -> None:
    leader = subprocess.Popen(
        ["aiperf record_processor_1a2b3c4d", "3"], executable="/bin/sleep", start_new_session=True
    )
    try:
        series = UsageSampler(leader.pid, interval=0.05).start()
        time.sleep(0.2)
        recorded = series.stop().as_json()["niced"]
        assert os.getpriority(os.PRIO_PROCESS, leader.pid) == os.getpriority(os.PRIO_PROCESS, 0)
        assert recorded == {
            "policy": "equal",
            "services": [],
            "nice": 0,
            "scheduler": "SCHED_OTHER",
            "threads": 0,
        }
    finally:
        leader.kill()
        leader.wait()


def test_the_policy_follows_the_host_cores_and_the_load() -> None:
    assert [choose_bookkeeping(2, c) for c in (1, 4, 5, 16, None)] == [
        "idle",
        "idle",
        "nice",  # more than two requests per core: idle would cost throughput
        "nice",
        "nice",  # a rate load
    ]
    assert choose_bookkeeping(SHARED_HOST_CORES, 2 * SHARED_HOST_CORES) == "idle"
    assert choose_bookkeeping(SHARED_HOST_CORES + 1, 1) == "nice"  # a bigger host

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
    SHARED_HOST_CORES,
    UsageSampler,
    autogroup_of,
    autogroups_enabled,
    choose_bookkeeping,
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
    leader = subprocess.Popen(
        [sys.executable, "-c", BURN.format(s=0.3) + "import time; time.sleep(2)"],
        process_group=0,
    )
    try:
        time.sleep(1.0)
        seen: dict[int, float] = {}
        assert group_cpu_seconds(leader.pid, seen, known=[]) == 0.0 and seen == {}
        assert group_cpu_seconds(leader.pid, seen) >= 0.2 and list(seen) == [leader.pid]
        assert group_cpu_seconds(leader.pid, seen, known=list(seen)) >= 0.2
    finally:
        leader.kill()
        leader.wait()


def test_the_sampler_thread_itself_is_niced_under_a_policy() -> None:
    leader = subprocess.Popen(["sleep", "2"], process_group=0)
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
        ["aiperf record_processor_1a2b3c4d", "3"], executable="/bin/sleep", process_group=0
    )
    sender = subprocess.Popen(["aiperf worker_9f8e7d6c", "3"], executable="/bin/sleep")
    try:
        sampler = UsageSampler(leader.pid, interval=0.05, policy="nice").start()
        time.sleep(0.3)
        series = sampler.stop()
        assert os.getpriority(os.PRIO_PROCESS, leader.pid) == 10
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, sender.pid) == ours  # not in the group
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
        ["aiperf records_manager", "3"], executable="/bin/sleep", process_group=0
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
        ["aiperf records_manager", "-c", code], executable=sys.executable, process_group=0
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
        ["aiperf record_processor_1a2b3c4d", "3"], executable="/bin/sleep", process_group=0
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


SPIN = (
    "import os, sys, time\n"
    "os.sched_setaffinity(0, {{{cpu}}})\n"
    "end = time.monotonic() + {s}\n"
    "while time.monotonic() < end: pass\n"
)


def _on_cpu_ns(pid: int) -> int:
    return int(open(f"/proc/{pid}/schedstat").read().split()[0])


def _in_root_cpu_cgroup() -> bool:
    """Autogroups only divide the root cpu cgroup: elsewhere the cgroup decides the shares."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return False
    paths = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths.get("cpu", paths.get("", "")) == "/"


@pytest.mark.skipif(
    not (autogroups_enabled() and _in_root_cpu_cgroup()),
    reason="the kernel's autogroups are off, or this test runs outside the root cpu cgroup",
)
@pytest.mark.parametrize("own_session", [False, True])
def test_idle_bookkeeping_yields_to_a_server_only_in_the_same_autogroup(
    own_session: bool,
) -> None:
    """Both busy on one core: a SCHED_IDLE "record processor" started as the runner starts
    AIPerf (a process group in our session) leaves a server of ours nearly all of it; in a
    session of its own the kernel splits the core between the two sessions first, so the
    lowered service takes about as much as the server."""
    cpu = max(os.sched_getaffinity(0))
    service = subprocess.Popen(
        ["aiperf record_processor_1a2b3c4d", "-c", SPIN.format(cpu=cpu, s=3.0)],
        executable=sys.executable,
        process_group=None if own_session else 0,
        start_new_session=own_session,
    )
    server = None
    try:
        sampler = UsageSampler(service.pid, interval=0.05, policy="idle").start()
        time.sleep(0.3)
        assert os.sched_getscheduler(service.pid) == os.SCHED_IDLE
        server = subprocess.Popen([sys.executable, "-c", SPIN.format(cpu=cpu, s=5.0)])
        time.sleep(0.3)  # the server is spinning on the core
        before = _on_cpu_ns(service.pid), _on_cpu_ns(server.pid)
        time.sleep(0.8)
        after = _on_cpu_ns(service.pid), _on_cpu_ns(server.pid)
        sampler.stop()
    finally:
        for p in (service, server):
            if p is not None:
                p.kill()
                p.wait()
    share = (after[0] - before[0]) / max(1, after[1] - before[1])  # service per server second
    if own_session:
        assert share > 0.5
    else:
        assert share < 0.1

"""Lowering AIPerf's bookkeeping services: real processes titled as AIPerf titles them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from inferlab_bench.case.aiperf_plugin.priorities import (
    SHARED_HOST_CORES,
    BookkeepingPolicy,
    BookkeepingPriorities,
    choose_bookkeeping,
    service_title,
)
from inferlab_bench.case.usage import UsageSampler, UsageSeries, autogroups_enabled

pytestmark = pytest.mark.skipif(not UsageSampler.available(), reason="needs Linux /proc")


class _Watch:
    """The runner's wiring: the sampler lowers the services through the hook as it scans."""

    def __init__(self, group: int, policy: BookkeepingPolicy) -> None:
        self.priorities = BookkeepingPriorities(group, policy)
        self.sampler = UsageSampler(
            group, 0.05, on_scan=self.priorities.lower_new, nice=self.priorities.sampler_nice
        ).start()

    def stop(self) -> dict[str, object]:
        series: UsageSeries = self.sampler.stop()
        assert series.processes >= 1
        return self.priorities.as_json()


def _until(done: Callable[[], bool], seconds: float = 30.0) -> bool:
    """Whether ``done()`` holds within ``seconds``: the sampler scans every 0.05 s, but under a
    CPU hog per core (load average 34 on 2 cores) a fixed 1.2 s wait saw the child's second
    thread not yet started, so the tests wait for the state, bounded far above any scan."""
    end = time.monotonic() + seconds
    while not done():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def _idle(pid: int) -> bool:
    return os.sched_getscheduler(pid) == os.SCHED_IDLE


def test_bookkeeping_services_are_niced_and_the_sender_is_not() -> None:
    """Processes titled as AIPerf titles its services (argv[0], as setproctitle leaves it)."""
    leader = subprocess.Popen(
        ["aiperf record_processor_1a2b3c4d", "3"], executable="/bin/sleep", process_group=0
    )
    sender = subprocess.Popen(["aiperf worker_9f8e7d6c", "3"], executable="/bin/sleep")
    try:
        watch = _Watch(leader.pid, "nice")
        assert _until(lambda: os.getpriority(os.PRIO_PROCESS, leader.pid) == 10)
        recorded = watch.stop()
        assert os.getpriority(os.PRIO_PROCESS, leader.pid) == 10
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, sender.pid) == ours  # not in the group
        assert recorded == {
            "policy": "nice",
            "services": ["record_processor"],
            "nice": 10,
            "scheduler": "SCHED_OTHER",
            "threads": 1,
            "host_runnable_before": None,
            "threads_restored_after_load": 0,
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
        watch = _Watch(leader.pid, "idle")
        assert _until(lambda: _idle(leader.pid))
        recorded = watch.stop()
        assert os.getpriority(os.PRIO_PROCESS, leader.pid) == 10
        assert os.sched_getscheduler(0) != os.SCHED_IDLE  # the sampler itself is untouched
        assert recorded["policy"] == "idle" and recorded["scheduler"] == "SCHED_IDLE"
        assert recorded["services"] == ["records_manager"]
    finally:
        leader.kill()
        leader.wait()


def test_every_thread_of_a_bookkeeping_service_is_lowered_also_one_started_later() -> None:
    """Nice and the scheduler are per thread: a service's ZeroMQ I/O thread (started before
    the service names itself) and a thread it starts mid-run are lowered with it."""
    code = (  # the second thread starts once the first scan lowered the service (stdin)
        "import sys, threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "sys.stdin.readline()\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "time.sleep(60)\n"
    )
    leader = subprocess.Popen(
        ["aiperf records_manager", "-c", code],
        executable=sys.executable,
        process_group=0,
        stdin=subprocess.PIPE,
        text=True,
    )
    assert leader.stdin is not None
    try:
        watch = _Watch(leader.pid, "idle")
        task = Path(f"/proc/{leader.pid}/task")
        assert _until(lambda: len(os.listdir(task)) == 2 and _idle(leader.pid))
        leader.stdin.write("mid-run\n")
        leader.stdin.flush()
        assert _until(
            lambda: len(os.listdir(task)) == 3 and all(_idle(int(t)) for t in os.listdir(task))
        )
        threads = [int(t) for t in os.listdir(task)]
        recorded = watch.stop()
        assert len(threads) == 3
        assert all(os.getpriority(os.PRIO_PROCESS, t) == 10 for t in threads)
        assert recorded["threads"] == 3
    finally:
        leader.kill()
        leader.wait()


def test_equal_policy_leaves_every_service_alone() -> None:
    leader = subprocess.Popen(
        ["aiperf record_processor_1a2b3c4d", "3"], executable="/bin/sleep", process_group=0
    )
    try:
        watch = _Watch(leader.pid, "equal")
        time.sleep(0.2)
        recorded = watch.stop()
        assert os.getpriority(os.PRIO_PROCESS, leader.pid) == os.getpriority(os.PRIO_PROCESS, 0)
        assert recorded == {
            "policy": "equal",
            "services": [],
            "nice": 0,
            "scheduler": "SCHED_OTHER",
            "threads": 0,
            "host_runnable_before": None,
            "threads_restored_after_load": 0,
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
    # A host already busy (a CPU hog per core) has no core nothing else wants: idle starved
    # AIPerf's bookkeeping there, so it stays nice.
    assert [choose_bookkeeping(2, 1, runnable) for runnable in (None, 0, 1, 2, 9)] == [
        "idle",
        "idle",
        "idle",
        "nice",
        "nice",
    ]


def test_nothing_is_lowered_before_the_load_starts() -> None:
    """AIPerf's start-up is timed by nobody: lowered there, its dataset manager loading the
    tokenizer beside a CPU hog per core used up AIPerf's 300 s configuration timeout."""
    leader = subprocess.Popen(
        ["aiperf dataset_manager", "5"], executable="/bin/sleep", process_group=0
    )
    try:
        # Right after the fork the child's cmdline can read empty (exec not yet done); a
        # process without a title is judged at the next scan, so wait for the title first.
        assert _until(lambda: service_title(leader.pid) == "dataset_manager")
        priorities = BookkeepingPriorities(leader.pid, "idle", from_load=True, runnable=0)
        priorities.lower_new([leader.pid])  # a scan during start-up
        assert os.sched_getscheduler(leader.pid) != os.SCHED_IDLE
        assert priorities.as_json()["services"] == []
        priorities.begin_load()
        priorities.lower_new([leader.pid])  # the first scan of the load
        assert os.sched_getscheduler(leader.pid) == os.SCHED_IDLE
        assert priorities.as_json()["services"] == ["dataset_manager"]
        assert priorities.as_json()["host_runnable_before"] == 0
        # The load over, the records are what is left: our priority back (we may: root, or
        # RLIMIT_NICE room), and nothing lowered after.
        priorities.end_load()
        if os.geteuid() == 0:
            assert not _idle(leader.pid)
            assert os.getpriority(os.PRIO_PROCESS, leader.pid) == os.getpriority(os.PRIO_PROCESS, 0)
            assert priorities.as_json()["threads_restored_after_load"] == 1
        priorities.lower_new([leader.pid])
        assert os.geteuid() != 0 or not _idle(leader.pid)
    finally:
        leader.kill()
        leader.wait()


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
        watch = _Watch(service.pid, "idle")
        assert _until(lambda: _idle(service.pid))
        server = subprocess.Popen([sys.executable, "-c", SPIN.format(cpu=cpu, s=5.0)])
        time.sleep(0.3)  # the server is spinning on the core
        before = _on_cpu_ns(service.pid), _on_cpu_ns(server.pid)
        time.sleep(0.8)
        after = _on_cpu_ns(service.pid), _on_cpu_ns(server.pid)
        watch.stop()
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

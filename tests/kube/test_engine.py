"""Submit, watch, cancel and fetch with fake ``aiperf`` / ``kubectl`` executables."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inferlab_bench.errors import LoadGeneratorError
from inferlab_bench.interrupts import Guard
from inferlab_bench.kube import engine
from inferlab_bench.kube.options import KubeOptions
from tests.kube.fakes import FakeCluster, call_seconds, fake_cluster

REPO = Path(__file__).resolve().parents[2]


def options(cluster: FakeCluster, **kwargs: object) -> KubeOptions:
    return KubeOptions(
        namespace="bench",
        aiperf_command=cluster.aiperf,
        kubectl_command=cluster.kubectl,
        poll_seconds=0.05,
        **kwargs,  # type: ignore[arg-type]
    )


def run(cluster: FakeCluster, tmp_path: Path, budget: float = 20.0, **kwargs: object):
    cr = tmp_path / "aiperfjob.yaml"
    cr.write_text("kind: AIPerfJob\n")
    return engine.run_job(
        "inferlab-x",
        cr,
        tmp_path / "aiperf",
        time.monotonic() + budget,
        options(cluster, **kwargs),
        tmp_path / "engine.log",
        guard=Guard("case", None),
    )


def test_completed_job_fetches_results_and_never_cancels(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "profile.json").write_text("{}")
    cluster = fake_cluster(
        tmp_path / "bin", phases=["Pending", "Running", "Completed"], results_from=source
    )
    outcome = run(cluster, tmp_path)
    assert (outcome.phase, outcome.stopped_by, outcome.results_fetched) == ("Completed", None, True)
    assert cluster.commands() == ["aiperf profile", *["kubectl get"] * 3, "aiperf results"]
    profile = cluster.calls()[0]
    assert profile[1:4] == ["kube", "profile", "--config"] and "--operator" in profile
    assert (tmp_path / "aiperf" / "profile.json").is_file()
    log = (tmp_path / "engine.log").read_text()
    assert "kube profile" in log and "kube results" in log


def test_failed_job_is_reported_as_failed(tmp_path: Path) -> None:
    cluster = fake_cluster(tmp_path / "bin", phases=["Running", "Failed"], results_exit=1)
    outcome = run(cluster, tmp_path)
    assert (outcome.phase, outcome.stopped_by, outcome.results_fetched) == ("Failed", None, False)
    assert "aiperf cancel" not in cluster.commands()
    assert cluster.commands().count("aiperf results") == 1


def test_results_of_a_completed_job_are_retried_until_the_budget_ends(tmp_path: Path) -> None:
    # Submit, one status, then results at least twice: 4 calls; 8 of the slowest of 3 measured
    # leaves room for the load to change (1 s flat failed at load average 23: submit alone
    # took over 1 s).
    budget = max(1.0, 8 * call_seconds(tmp_path / "timing"))
    cluster = fake_cluster(tmp_path / "bin", phases=["Completed"], results_exit=1)
    outcome = run(cluster, tmp_path, budget=budget)
    assert (outcome.phase, outcome.results_fetched) == ("Completed", False)
    assert cluster.commands().count("aiperf results") > 1


def test_deadline_cancels_the_job_through_aiperf(tmp_path: Path) -> None:
    # The submit must answer inside the budget (its timeout): 3 of the slowest measured calls.
    call = call_seconds(tmp_path / "timing")
    budget = max(0.6, 3 * call)
    cluster = fake_cluster(tmp_path / "bin", phases=["Running"])
    started = time.monotonic()
    outcome = run(cluster, tmp_path, budget=budget)
    # Past the budget only the cancel and the one fetch run (a status call may be in flight):
    # 3 calls, doubled for the load's swings; 0.6 + 0.3 s on a quiet host.
    assert time.monotonic() - started < budget + 6 * call + 1.0
    assert (outcome.phase, outcome.stopped_by) == ("Cancelled", "deadline")
    cancel = [c for c in cluster.calls() if c[:3] == ["aiperf", "kube", "cancel"]]
    assert cancel == [["aiperf", "kube", "cancel", "inferlab-x", "--namespace", "bench"]]
    # Partial results are still fetched once, for the artifacts.
    assert cluster.commands()[-1] == "aiperf results"


def test_without_the_operator_the_jobset_is_watched_and_deleted(tmp_path: Path) -> None:
    budget = max(0.5, 3 * call_seconds(tmp_path / "timing"))  # as in the test above
    cluster = fake_cluster(tmp_path / "bin", phases=["/profiling"])
    outcome = run(cluster, tmp_path, budget=budget, operator=False)
    assert outcome.stopped_by == "deadline"
    calls = cluster.calls()
    assert calls[1][:3] == ["kubectl", "get", "jobset/aiperf-inferlab-x"]
    assert calls[-2][:3] == ["kubectl", "delete", "jobset/aiperf-inferlab-x"]
    assert calls[-1][-2:] == ["--from-pods", "--shutdown"]


@pytest.mark.parametrize(
    ("answer", "operator", "phase"),
    [
        ("Running", True, ""),
        ("Completed", True, "Completed"),
        ("Cancelled", True, "Cancelled"),
        ("/profiling", False, ""),
        ("/stopping", False, "Completed"),
        ("Failed/processing", False, "Failed"),
    ],
)
def test_status_answers(answer: str, operator: bool, phase: str) -> None:
    assert engine.parse_phase(answer, operator=operator) == phase


def test_a_failed_submit_is_a_load_generator_error(tmp_path: Path) -> None:
    cluster = fake_cluster(tmp_path / "bin", profile_exit=3)
    with pytest.raises(LoadGeneratorError, match=r"aiperf kube profile failed \(exit 3\)"):
        run(cluster, tmp_path)


def test_a_missing_program_names_it(tmp_path: Path) -> None:
    cluster = FakeCluster(tmp_path / "nowhere")
    with pytest.raises(LoadGeneratorError, match="program not found"):
        run(cluster, tmp_path)


_CHILD = """
import json, sys, time
from pathlib import Path
from inferlab_bench import interrupts
from inferlab_bench.kube import engine
from inferlab_bench.kube.options import KubeOptions
bin_dir, tmp = Path(sys.argv[1]), Path(sys.argv[2])
cr = tmp / "aiperfjob.yaml"
cr.write_text("kind: AIPerfJob\\n")
options = KubeOptions(namespace="bench", aiperf_command=(str(bin_dir / "aiperf"),),
                      kubectl_command=(str(bin_dir / "kubectl"),), poll_seconds=0.05)
with interrupts.guard("case", 60) as guard:
    outcome = engine.run_job(
        "inferlab-x", cr, tmp / "aiperf", time.monotonic() + 60, options, guard=guard
    )
print(json.dumps({"phase": outcome.phase, "stopped_by": outcome.stopped_by}))
"""


def test_sigterm_cancels_the_job(tmp_path: Path) -> None:
    cluster = fake_cluster(tmp_path / "bin", phases=["Running"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(cluster.directory), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while not (cluster.directory / "status-seen").exists():
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert json.loads(out) == {"phase": "Cancelled", "stopped_by": "signal"}
    assert "aiperf cancel" in cluster.commands()


def test_the_default_aiperf_is_this_interpreters_own_not_paths() -> None:
    # From a venv that is not activated, `aiperf` on PATH is another install or none.
    assert KubeOptions(namespace="bench").aiperf_command == (sys.executable, "-m", "aiperf")

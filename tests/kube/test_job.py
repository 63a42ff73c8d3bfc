"""The case stage on the KubeEngine end to end, with a fake cluster whose results are a real
local run's.

The local case runs real AIPerf against the simulator; its AIPerf outputs are laid out the
way ``aiperf kube results`` writes them (the controller's ``/results`` top-level files only:
AIPerf's results listing skips subdirectories such as ``logs/`` and dot-files such as its
ready marker), and the fake ``aiperf kube results`` hands that folder back.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from inferlab_bench.case.stage import CaseOptions, run_case
from inferlab_bench.kube.job import KubeEngine
from inferlab_bench.kube.options import KubeOptions
from inferlab_bench.kube.population import UrlDelivery
from inferlab_bench.protocol import BenchClientRequest, BenchClientResult, ClientStatus
from inferlab_bench.simulator import LatencyConfig, SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR, make_request, write_population
from tests.kube.fakes import FakeCluster, fake_cluster

pytestmark = pytest.mark.slow

SLO = {"request_latency_ms": 200.0, "minimum_good_request_ratio": 0.1}
POD_TOKENIZER = "Qwen/Qwen2-0.5B-Instruct"


def on_kube(request: BenchClientRequest, options: KubeOptions) -> BenchClientResult:
    return run_case(request, engine=KubeEngine(options))


def kube_results_layout(aiperf_dir: Path, target: Path) -> Path:
    """What `aiperf kube results NAME --output target` leaves: top-level files, no dot-files."""
    target.mkdir(parents=True)
    for item in aiperf_dir.iterdir():
        if item.is_file() and not item.name.startswith("."):
            shutil.copy2(item, target / item.name)
    return target


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> tuple[BenchClientRequest, BenchClientResult]:
    root = tmp_path_factory.mktemp("local")
    population = write_population(root / "population.jsonl", [4, 24, 4, 24, 24, 4])
    config = SimulatorConfig(
        model="sim-model",
        tokenizer=TOKENIZER_DIR,
        latency=LatencyConfig(prefill_base_ms=40.0, decode_base_ms=10.0),
    )
    with running_simulator(config) as sim:
        request = make_request(
            port=sim.port,
            artifact_dir=root / "case",
            population=population,
            request_count=6,
            slo=SLO,
        )
        result = run_case(request, CaseOptions(echo=io.StringIO()))
    assert result.status is ClientStatus.SUCCEEDED, result.error
    return request, result


@pytest.fixture
def on_cluster(
    local: tuple[BenchClientRequest, BenchClientResult], tmp_path: Path
) -> Iterator[tuple[BenchClientRequest, KubeOptions, FakeCluster]]:
    request, _ = local
    results = kube_results_layout(request.artifact_dir / "aiperf", tmp_path / "fetched")
    cluster = fake_cluster(tmp_path / "bin", phases=["Running", "Completed"], results_from=results)
    kube_request = request.model_copy(
        update={
            "artifact_dir": tmp_path / "kube-case",
            "endpoint": request.endpoint.model_copy(update={"host": "sim.bench.svc"}),
        }
    )
    options = KubeOptions(
        namespace="bench",
        population=UrlDelivery("http://files.bench.svc/population.jsonl"),
        tokenizer=POD_TOKENIZER,
        aiperf_command=cluster.aiperf,
        kubectl_command=cluster.kubectl,
        poll_seconds=0.05,
    )
    yield kube_request, options, cluster


def test_fetched_results_give_the_local_result(
    local: tuple[BenchClientRequest, BenchClientResult],
    on_cluster: tuple[BenchClientRequest, KubeOptions, FakeCluster],
    check_v6: Any,
) -> None:
    _, local_result = local
    request, options, cluster = on_cluster
    result = on_kube(request, options)
    assert result.status is ClientStatus.SUCCEEDED, result.error
    check_v6("BenchClientResult", orjson.loads(result.model_dump_json()))
    assert result.metrics == local_result.metrics
    assert result.request_slo == local_result.request_slo
    assert (result.completed_requests, result.failed_requests) == (
        local_result.completed_requests,
        local_result.failed_requests,
    )
    assert cluster.commands() == [
        "aiperf validate",
        "aiperf profile",
        "kubectl get",
        "kubectl get",
        "aiperf results",
    ]
    assert result.native_command[1:3] == ["kube", "profile"]
    kinds = {a.kind for a in result.raw_artifacts}
    assert {"records", "summary", "validity", "kube_custom_resource", "request_body"} <= kinds


def test_validity_is_judged_as_locally(
    local: tuple[BenchClientRequest, BenchClientResult],
    on_cluster: tuple[BenchClientRequest, KubeOptions, FakeCluster],
) -> None:
    local_request, _ = local
    request, options, _ = on_cluster
    on_kube(request, options)
    ours = orjson.loads((request.artifact_dir / "validity.json").read_bytes())
    theirs = orjson.loads((local_request.artifact_dir / "validity.json").read_bytes())
    # The client's own cost is sampled only where AIPerf runs in sight (not in a pod): the
    # kube document leaves that verdict out, and everything else is judged the same way.
    assert ours["client_cost"] is None and "client_cost_low" not in ours["verdicts"]
    # The truth is asked only of a server reached from here that announced itself as our
    # simulator: the local case has it (its dispatch check is then the requests' lateness at
    # the server), the pod's case does not (its check is AIPerf's own dispatch delay).
    assert ours["measured"] is None and theirs["measured"] is not None
    assert ours["dispatch"]["checks"][0]["name"] == "dispatch_delay_p95_ms"
    assert theirs["dispatch"]["checks"][0]["name"] == "arrival_late_p95_ms"
    for doc in (ours, theirs):
        for section in ("verdicts", "explanations"):
            doc[section].pop("client_cost_low", None)
        doc["explanations"].pop("load_generator_kept_up")
        for key in ("client_cost", "verdict", "measured"):
            doc.pop(key)
        doc["dispatch"].pop("checks")
    assert ours == theirs


def test_a_failed_job_is_a_failed_result_listing_what_was_written(
    on_cluster: tuple[BenchClientRequest, KubeOptions, FakeCluster],
) -> None:
    request, options, cluster = on_cluster
    (cluster.directory / "scenario.json").write_text('{"phases": ["Failed"]}')
    result = on_kube(request, options)
    assert result.status is ClientStatus.FAILED
    assert result.error is not None and "ended Failed" in result.error
    assert {"kube_custom_resource", "log"} <= {a.kind for a in result.raw_artifacts}


def test_a_loopback_url_is_refused_before_anything_is_submitted(
    local: tuple[BenchClientRequest, BenchClientResult],
    on_cluster: tuple[BenchClientRequest, KubeOptions, FakeCluster],
) -> None:
    local_request, _ = local
    request, options, cluster = on_cluster
    result = on_kube(request.model_copy(update={"endpoint": local_request.endpoint}), options)
    assert result.status is ClientStatus.FAILED
    assert result.error is not None and "loopback" in result.error
    assert cluster.calls() == []


def test_a_local_population_that_is_not_the_named_one_is_refused_before_submitting(
    on_cluster: tuple[BenchClientRequest, KubeOptions, FakeCluster],
) -> None:
    request, options, cluster = on_cluster
    assert request.population is not None
    wrong = request.population.model_copy(update={"sha256": "0" * 64})
    result = on_kube(request.model_copy(update={"population": wrong}), options)
    assert result.status is ClientStatus.FAILED
    assert result.error is not None and "sha256" in result.error and "0" * 64 in result.error
    assert cluster.calls() == []

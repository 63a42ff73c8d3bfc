"""The AIPerfJob of every load shape: AIPerf accepts it strictly and it carries the local load."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferlab_bench.case.stage import planned_config
from inferlab_bench.errors import ConfigurationError
from inferlab_bench.kube.manifests import (
    KubeManifests,
    build_manifests,
    load_settings,
    parse_config,
    pod_config,
)
from inferlab_bench.kube.options import KubeOptions
from inferlab_bench.kube.population import (
    INIT_CONTAINER_NAME,
    MOUNT_DIR,
    PvcDelivery,
    UrlDelivery,
)
from tests.kube import configs

AIPERF = (sys.executable, "-m", "aiperf")
URL = "https://files.example.com/pop/population.jsonl"
SHAPE_IDS = ["concurrency", "poisson", "gamma", "unbounded"]


def kube_options(**kwargs: Any) -> KubeOptions:
    kwargs.setdefault("population", UrlDelivery(URL))
    return KubeOptions(namespace="bench", aiperf_command=AIPERF, **kwargs)


def manifests_for(shape: dict[str, Any], warmup: int = 0, **kwargs: Any) -> KubeManifests:
    request = configs.request(shape, warmup=warmup)
    local = planned_config(request)
    return build_manifests(local, request, kube_options(**kwargs), "inferlab-test")


@pytest.mark.parametrize("shape", configs.ALL_SHAPES, ids=SHAPE_IDS)
def test_the_job_carries_the_local_load_settings(shape: dict[str, Any]) -> None:
    request = configs.request(shape)
    local = planned_config(request)
    manifests = build_manifests(local, request, kube_options(), "inferlab-test")
    kube = pod_config(manifests)
    assert load_settings(kube) == load_settings(parse_config(local))
    # ... and those are the load the case asks for (DESIGN.md "Load shapes").
    phase = kube.benchmark.model_dump(mode="json", by_alias=True, exclude_none=True)["phases"]
    expected = configs.profiling(request)
    assert {k: phase[0].get(k) for k in expected} == expected
    assert kube.random_seed == request.definition.seed
    assert kube.benchmark.endpoint.extra == local["benchmark"]["endpoint"]["extra"]
    assert kube.benchmark.slos == local["benchmark"]["slos"]


def test_warmup_rides_along_without_a_reset() -> None:
    kube = pod_config(manifests_for(configs.ALL_SHAPES[0], warmup=3))
    phases = kube.benchmark.model_dump(mode="json", by_alias=True, exclude_none=True)["phases"]
    assert [(p["kind"], p["requests"]) for p in phases] == [("warmup", 3), ("profiling", 64)]
    assert kube.benchmark.datasets[0].entries == 3 + 64


def test_every_load_shape_passes_aiperf_kube_validate_strict(tmp_path: Path) -> None:
    paths = []
    for name, shape in zip(SHAPE_IDS, configs.ALL_SHAPES, strict=True):
        paths.append(tmp_path / f"{name}.yaml")
        paths[-1].write_text(manifests_for(shape, workers=4).yaml())
    paths.append(tmp_path / "warmup.yaml")
    paths[-1].write_text(manifests_for(configs.ALL_SHAPES[0], warmup=3).yaml())
    done = subprocess.run(
        [*AIPERF, "kube", "validate", "--strict", "-o", "json", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed" in done.stdout


def test_population_travels_on_a_volume_checked_by_sha256() -> None:
    manifests = manifests_for(configs.ALL_SHAPES[0])
    spec = manifests.custom_resource["spec"]
    assert spec["benchmark"]["datasets"][0]["path"] == f"{MOUNT_DIR}/population.jsonl"
    template = spec["podTemplate"]
    (init,) = template["initContainers"]
    env = {e["name"]: e["value"] for e in init["env"]}
    assert init["name"] == INIT_CONTAINER_NAME
    assert env["INFERLAB_POPULATION_SHA256"] == configs.SHA
    assert env["INFERLAB_POPULATION_URL"] == URL
    assert "hashlib.sha256()" in init["command"][-1]
    assert template["volumes"] == [{"name": "inferlab-population", "emptyDir": {}}]
    assert template["volumeMounts"][0]["readOnly"] is True


def test_a_claim_is_mounted_read_only() -> None:
    manifests = manifests_for(configs.ALL_SHAPES[0], population=PvcDelivery("pops", "a/b.jsonl"))
    template = manifests.custom_resource["spec"]["podTemplate"]
    claim = template["volumes"][0]["persistentVolumeClaim"]
    assert claim == {"claimName": "pops", "readOnly": True}
    env = {e["name"]: e["value"] for e in template["initContainers"][0]["env"]}
    assert env == {
        "INFERLAB_POPULATION_PATH": f"{MOUNT_DIR}/a/b.jsonl",
        "INFERLAB_POPULATION_SHA256": configs.SHA,
    }


def test_raw_jobset_runs_the_check_before_the_dataset_manager(tmp_path: Path) -> None:
    cr = tmp_path / "aiperfjob.yaml"
    cr.write_text(manifests_for(configs.ALL_SHAPES[1]).yaml())
    done = subprocess.run(
        [*AIPERF, "kube", "generate", "--no-operator", "--config", str(cr), "-n", "bench"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    (jobset,) = [d for d in docs if d["kind"] == "JobSet"]
    jobs = {
        j["name"]: j["template"]["spec"]["template"]["spec"]
        for j in jobset["spec"]["replicatedJobs"]
    }
    controller = jobs["controller"]
    assert [c["name"] for c in controller["initContainers"]] == [INIT_CONTAINER_NAME]
    (dataset_manager,) = [c for c in controller["containers"] if c["name"] == "dataset-manager"]
    assert {"name": "inferlab-population", "mountPath": MOUNT_DIR, "readOnly": True} in (
        dataset_manager["volumeMounts"]
    )
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["run_config.json"]
    assert f"{MOUNT_DIR}/population.jsonl" in config


def test_replicas_go_to_aiperf_url_strategy() -> None:
    extra = ("http://vllm-1.serving.svc:8000", "http://vllm-2.serving.svc:8000")
    kube = pod_config(manifests_for(configs.ALL_SHAPES[0], extra_urls=extra))
    assert kube.benchmark.endpoint.urls == ["http://127.0.0.1:8000", *extra]
    assert str(kube.benchmark.endpoint.url_strategy) == "round_robin"


def test_warmup_with_a_reset_is_refused_with_the_reason() -> None:
    request = configs.request(configs.ALL_SHAPES[0], warmup=2, reset=True)
    local = planned_config(request)
    with pytest.raises(ConfigurationError, match="after warmup drains") as caught:
        build_manifests(local, request, kube_options(), "inferlab-test")
    assert "--engine local" in str(caught.value.hint)


def test_a_local_tokenizer_path_is_refused() -> None:
    request = configs.request(configs.ALL_SHAPES[0])
    request = request.model_copy(
        update={"model": request.model.model_copy(update={"locator": "/models/qwen2"})}
    )
    local = planned_config(request)
    with pytest.raises(ConfigurationError, match="path on this machine") as caught:
        build_manifests(local, request, kube_options(), "inferlab-test")
    assert "--pod-tokenizer" in str(caught.value.hint)
    ok = build_manifests(local, request, kube_options(tokenizer="Qwen/Qwen2-0.5B"), "inferlab-t")
    assert pod_config(ok).benchmark.tokenizer.name == "Qwen/Qwen2-0.5B"


def test_a_population_needs_a_delivery() -> None:
    with pytest.raises(ConfigurationError, match="no way to deliver it"):
        manifests_for(configs.ALL_SHAPES[0], population=None)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"namespace": "Bench_1"}, "not a valid Kubernetes namespace"),
        ({"workers": 0}, "positive count"),
        ({"extra_urls": ("vllm:8000",)}, "expected http://HOST:PORT"),
        ({"population": UrlDelivery("s3://bucket/p")}, "http:// or https://"),
        ({"population": PvcDelivery("pops", "../p")}, "relative path"),
    ],
)
def test_bad_options_are_configuration_errors(kwargs: dict[str, Any], message: str) -> None:
    kwargs.setdefault("namespace", "bench")
    with pytest.raises(ConfigurationError, match=message):
        KubeOptions(**kwargs)

"""The local AIPerf config + KubeOptions -> AIPerf's own AIPerfJob custom resource (pure).

The CR is built by AIPerf's own generator (``aiperf.config.kube.KubeOptions.to_crd_spec``,
the code behind ``aiperf kube generate --operator``); raw JobSet manifests for
``--no-operator`` come from ``aiperf kube generate --no-operator`` run on this CR (engine.py).
What we change on the way is only what a pod cannot share with this machine, and each change
is listed as a ``Change``; ``load_settings`` must come out equal on both sides.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from inferlab_bench.errors import ConfigurationError, InferlabError
from inferlab_bench.kube.options import KubeOptions
from inferlab_bench.kube.population import PodPopulation, pod_population
from inferlab_bench.protocol import BenchClientRequest, describe_validation_error

API_VERSION = "aiperf.nvidia.com/v1alpha1"
KIND = "AIPerfJob"
POD_ARTIFACT_DIR = "/results"
LABEL = "inferlab.dev/case"
URL_STRATEGY = "round_robin"
_LOAD_FIELDS = ("models", "endpoint", "datasets", "phases", "slos")


@dataclass(frozen=True)
class Change:
    """One setting the Kubernetes form carries differently from the local config, and why."""

    field: str
    local: object
    kube: object
    reason: str


@dataclass(frozen=True)
class KubeManifests:
    """The AIPerfJob for one case and what differs from the local AIPerf config."""

    name: str
    namespace: str
    custom_resource: dict[str, Any]
    changes: tuple[Change, ...]
    population: PodPopulation | None
    extra_urls: tuple[str, ...] = ()
    config: dict[str, Any] | None = None
    """The AIPerf config the pods run: the local one with ``changes`` applied."""

    def yaml(self) -> str:
        text: str = yaml.safe_dump(self.custom_resource, sort_keys=False, allow_unicode=True)
        return text


def job_name(request: BenchClientRequest, salt: str = "") -> str:
    """A DNS-label name (<= 40 chars) that identifies the case; ``salt`` separates reruns."""
    digest = hashlib.sha256(request.model_dump_json().encode() + salt.encode()).hexdigest()
    return f"inferlab-{digest[:16]}"


def build_manifests(
    local_config: dict[str, Any],
    request: BenchClientRequest,
    options: KubeOptions,
    name: str,
) -> KubeManifests:
    """Translate the AIPerf config the local case would run into its AIPerfJob."""
    refuse_unfaithful(request, options)
    population = _population(request, options)
    kube_config, changes = _pod_config(local_config, request, options, population)
    config = _validated(kube_config, "Kubernetes")
    spec = _crd_spec(config, options, name)
    if options.workers is not None:
        reason = "--workers: AIPerf's worker pods in total (a local run sizes its own)"
        changes += (Change("benchmark.runtime.workers", None, options.workers, reason),)
    if population is not None:
        spec["podTemplate"] = _pod_template(population)
    custom_resource = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": options.namespace, "labels": {LABEL: name}},
        "spec": spec,
    }
    manifests = KubeManifests(
        name,
        options.namespace,
        custom_resource,
        changes,
        population,
        options.extra_urls,
        kube_config,
    )
    _check_same_load(local_config, manifests)
    return manifests


def refuse_unfaithful(request: BenchClientRequest, options: KubeOptions) -> None:
    """Refuse cases the operator cannot run exactly as the local case would."""
    case = request.case
    if request.definition.reset_prefix_cache and case.warmup_request_count > 0:
        raise ConfigurationError(
            "reset_prefix_cache with warmup_request_count > 0 cannot run on Kubernetes: the "
            "reset must fall after warmup drains and before profiling starts, and AIPerf 0.13.0 "
            "offers no hook there in its pods (our local phase barrier is not in its image)",
            hint="run this case with --engine local, or set warmup_request_count to 0",
        )
    if request.population is not None and options.population is None:
        raise ConfigurationError(
            "the case reads a population, but no way to deliver it to the pods was given",
            hint="pass --population-url URL (fetched by an init container) "
            "or --population-pvc CLAIM (a volume that already holds population.jsonl)",
        )


def load_settings(config: Any) -> dict[str, Any]:
    """The settings that shape the load, from an ``AIPerfConfig``: they must match locally."""
    benchmark = config.benchmark.model_dump(mode="json", by_alias=True, exclude_none=True)
    settings = {key: benchmark.get(key) for key in _LOAD_FIELDS}
    endpoint = settings["endpoint"]
    if isinstance(endpoint, dict):
        # Where the load goes is compared on its own (pod_urls); how much load is compared here.
        for key in ("resetKvCache", "urls", "urlStrategy"):
            endpoint.pop(key, None)
    for dataset in settings["datasets"] or []:
        dataset.pop("path", None)
    settings["randomSeed"] = config.random_seed
    return settings


def parse_config(config: dict[str, Any]) -> Any:
    """Validate an AIPerf config dict with AIPerf's own model (``AIPerfConfig``)."""
    return _validated(config, "local")


def _population(request: BenchClientRequest, options: KubeOptions) -> PodPopulation | None:
    if request.population is None or options.population is None:
        return None
    return pod_population(options.population, request.population.sha256, options.image)


def _pod_config(
    local_config: dict[str, Any],
    request: BenchClientRequest,
    options: KubeOptions,
    population: PodPopulation | None,
) -> tuple[dict[str, Any], tuple[Change, ...]]:
    config = copy.deepcopy(local_config)
    benchmark = config.setdefault("benchmark", {})
    changes = [
        _set(benchmark, ("artifacts", "dir"), POD_ARTIFACT_DIR, "AIPerf's pods write to /results")
    ]
    if population is not None:
        changes += _move_dataset(benchmark, population.path)
    changes += _tokenizer(benchmark, request, options)
    endpoint = benchmark.get("endpoint", {})
    if isinstance(endpoint, dict):
        changes += _urls(endpoint, options)
        for key in ("reset_kv_cache", "resetKvCache"):
            if key in endpoint:
                changes.append(
                    Change(
                        f"benchmark.endpoint.{key}",
                        endpoint.pop(key),
                        None,
                        "AIPerf 0.13.0 fires reset_kv_cache only in `aiperf profile`, never in its "
                        "pods; the client resets each server itself just before submitting",
                    )
                )
    return config, tuple(changes)


def pod_urls(request: BenchClientRequest, options: KubeOptions) -> list[str]:
    """Every server URL the pods send to: the request's endpoint first, then ``--url`` extras."""
    return [request.endpoint.base_url, *options.extra_urls]


def _urls(endpoint: dict[str, Any], options: KubeOptions) -> list[Change]:
    if not options.extra_urls:
        return []
    local = endpoint.pop("url", None) or endpoint.pop("urls", None)
    first = local[0] if isinstance(local, list) else local
    urls = [first, *options.extra_urls]
    endpoint["urls"] = urls
    endpoint["urlStrategy"] = URL_STRATEGY
    return [
        Change(
            "benchmark.endpoint.urls",
            local,
            urls,
            f"--url repeated: replicas without a load balancer, {URL_STRATEGY} by AIPerf",
        )
    ]


def _move_dataset(benchmark: dict[str, Any], path: str) -> list[Change]:
    datasets = benchmark.get("datasets")
    found = [benchmark["dataset"]] if isinstance(benchmark.get("dataset"), dict) else []
    found += [d for d in datasets or [] if isinstance(d, dict) and d.get("type") == "file"]
    if len(found) != 1:
        raise InferlabError(
            f"local AIPerf config: expected exactly one file dataset, found {len(found)}"
        )
    local = found[0].get("path")
    found[0]["path"] = path
    return [Change("benchmark.dataset.path", local, path, "the population volume in the pods")]


def _tokenizer(
    benchmark: dict[str, Any], request: BenchClientRequest, options: KubeOptions
) -> list[Change]:
    tokenizer = benchmark.setdefault("tokenizer", {})
    local = tokenizer.get("name", request.model.locator)
    if options.tokenizer is not None:
        tokenizer["name"] = options.tokenizer
        return [
            Change(
                "benchmark.tokenizer.name",
                local,
                options.tokenizer,
                "--pod-tokenizer: the name the pods load it by",
            )
        ]
    if isinstance(local, str) and local.startswith(("/", "./", "~")):
        raise ConfigurationError(
            f"tokenizer {local!r} is a path on this machine; AIPerf's pods cannot read it",
            hint="pass --pod-tokenizer with a Hugging Face id (or a path inside the AIPerf image)",
        )
    return []


def _set(tree: dict[str, Any], path: tuple[str, ...], value: object, reason: str) -> Change:
    node = tree
    for key in path[:-1]:
        node = node.setdefault(key, {})
    local = node.get(path[-1])
    node[path[-1]] = value
    return Change("benchmark." + ".".join(path), local, value, reason)


def _validated(config: dict[str, Any], which: str) -> Any:
    from aiperf.config import AIPerfConfig

    try:
        return AIPerfConfig.model_validate(copy.deepcopy(config))
    except ValidationError as exc:
        raise ConfigurationError(
            f"{which} AIPerf config rejected by AIPerf: {describe_validation_error(exc)}"
        ) from exc


def _crd_spec(config: Any, options: KubeOptions, name: str) -> dict[str, Any]:
    from aiperf.config.kube import KubeOptions as AIPerfKubeOptions

    fields: dict[str, Any] = {"namespace": options.namespace, "image": options.image, "name": name}
    if options.workers is not None:
        fields["total_workers"] = options.workers
    try:
        spec: dict[str, Any] = AIPerfKubeOptions(**fields).to_crd_spec(config)
    except (ValidationError, ValueError) as exc:
        detail = describe_validation_error(exc) if isinstance(exc, ValidationError) else str(exc)
        raise ConfigurationError(f"AIPerf rejected the Kubernetes options: {detail}") from exc
    return spec


def _pod_template(population: PodPopulation) -> dict[str, Any]:
    return {
        "volumes": list(population.volumes),
        "volumeMounts": list(population.volume_mounts),
        "initContainers": list(population.init_containers),
    }


def _check_same_load(local_config: dict[str, Any], manifests: KubeManifests) -> None:
    # The operator reads spec.benchmark back with AIPerf's converter; read it the same way.
    local = load_settings(parse_config(local_config))
    kube_config = pod_config(manifests)
    kube = load_settings(kube_config)
    if local != kube:
        differing = sorted(k for k in local if local[k] != kube.get(k))
        raise InferlabError(
            f"internal: the AIPerfJob would not carry the local load settings ({differing})"
        )
    expected = [*parse_config(local_config).benchmark.endpoint.urls, *manifests.extra_urls]
    if list(kube_config.benchmark.endpoint.urls) != expected:
        raise InferlabError(
            f"internal: the AIPerfJob sends to {kube_config.benchmark.endpoint.urls}, "
            f"expected {expected}"
        )


def pod_config(manifests: KubeManifests) -> Any:
    """The ``AIPerfConfig`` the operator reads from the CR (AIPerf's own spec converter)."""
    from aiperf.kubernetes.spec_converter import extract_benchmark_config

    return extract_benchmark_config(copy.deepcopy(manifests.custom_resource["spec"]))

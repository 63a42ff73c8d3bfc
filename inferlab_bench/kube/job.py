"""KubeEngine: the case's AIPerf config as an AIPerfJob on Kubernetes (the stage's seam)."""

from __future__ import annotations

import ipaddress
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.case.engine import EngineOutcome, EngineRun
from inferlab_bench.case.reset import ResetTarget
from inferlab_bench.case.stage import planned_config
from inferlab_bench.errors import ConfigurationError, LoadGeneratorError
from inferlab_bench.kube import engine
from inferlab_bench.kube.manifests import (
    KubeManifests,
    build_manifests,
    job_name,
    pod_urls,
    refuse_unfaithful,
)
from inferlab_bench.kube.options import KubeOptions
from inferlab_bench.layout import AIPERF_DIR
from inferlab_bench.protocol import BenchClientRequest, RawArtifact

KUBE_DIR = "kube"
CR_FILE = "aiperfjob.yaml"
RAW_MANIFESTS_FILE = "manifests.yaml"
TRANSLATION_FILE = "translation.json"
ENGINE_LOG = "engine.log"


@dataclass(frozen=True)
class PreparedKubeCase:
    """The manifests of one case, written to ``<artifact_dir>/kube/`` and validated by AIPerf."""

    manifests: KubeManifests
    directory: Path
    artifacts: tuple[RawArtifact, ...]

    @property
    def custom_resource(self) -> Path:
        return self.directory / CR_FILE


def prepare_kube_case(
    request: BenchClientRequest,
    options: KubeOptions,
    *,
    local_config: dict[str, Any] | None = None,
) -> PreparedKubeCase:
    """Build the AIPerfJob from the local config (the case stage's, or planned here for a
    dry run), write it, pass ``aiperf kube validate --strict``, and for ``--no-operator``
    write AIPerf's raw manifests beside it."""
    if local_config is None:
        local_config = planned_config(request)
    salt = "" if options.dry_run else str(time.time_ns())
    name = options.name or job_name(request, salt)
    manifests = build_manifests(local_config, request, options, name)
    kube_dir = request.artifact_dir / KUBE_DIR
    cr_path = kube_dir / CR_FILE
    write_bytes_atomic(cr_path, manifests.yaml().encode("utf-8"))
    write_bytes_atomic(kube_dir / "local-aiperf-config.json", _json(local_config))
    translation = _translation(request, options, manifests)
    write_bytes_atomic(kube_dir / TRANSLATION_FILE, _json(translation))
    artifacts = [
        RawArtifact(name="aiperfjob", kind="kube_custom_resource", path=cr_path),
        RawArtifact(
            name="kube-translation", kind="kube_translation", path=kube_dir / TRANSLATION_FILE
        ),
    ]
    engine.validate_strict(cr_path, options)
    if not options.operator:
        raw = kube_dir / RAW_MANIFESTS_FILE
        write_bytes_atomic(raw, engine.generate_raw_manifests(cr_path, options).encode("utf-8"))
        artifacts.append(RawArtifact(name="kube-manifests", kind="kube_manifests", path=raw))
    return PreparedKubeCase(manifests, kube_dir, tuple(artifacts))


class KubeEngine:
    """The case's AIPerf config as an AIPerfJob: submitted, watched, cancelled on the deadline
    or a signal, its results fetched into the case's aiperf dir for the stage to judge."""

    name = "kube"
    reaches_server_from_here = False
    hosts_our_plugin = False
    """The AIPerf image has no inferlab-bench in it."""
    """The pods send the load; the server may not even be reachable from this machine."""

    def __init__(self, options: KubeOptions) -> None:
        if options.dry_run:
            raise ConfigurationError("internal: a dry run prepares manifests and runs no case")
        self.options = options

    def check(self, request: BenchClientRequest, reset: ResetTarget | None) -> None:
        refuse_loopback(pod_urls(request, self.options))
        refuse_unfaithful(request, self.options)
        if reset is not None:
            self.reset_urls(request)

    def reset_urls(self, request: BenchClientRequest) -> list[str]:
        """The request's server, then each ``--url`` replica (each has its own cache)."""
        return [request.endpoint.base_url, *map(_replica_base_url, self.options.extra_urls)]

    def run(self, run: EngineRun) -> EngineOutcome:
        request = run.request
        prepared = prepare_kube_case(request, self.options, local_config=run.config)
        run.artifacts.extend(prepared.artifacts)
        log_path = prepared.directory / ENGINE_LOG
        run.artifacts.append(RawArtifact(name="kube-engine-log", kind="log", path=log_path))
        outcome = engine.run_job(
            prepared.manifests.name,
            prepared.custom_resource,
            request.artifact_dir / AIPERF_DIR,
            run.stop_at,
            self.options,
            log_path,
            guard=run.guard,
        )
        command = list(outcome.submit.argv) if outcome.submit else []
        if outcome.stopped_by is None:
            _raise_for_outcome(prepared.manifests.name, outcome)
        return EngineOutcome(
            command, 0 if outcome.stopped_by is None else None, log_path, outcome.stopped_by
        )


def _replica_base_url(url: str) -> str:
    """A replica's base URL for a prefix-cache reset from here: plain http://HOST:PORT."""
    parts = urlsplit(url)
    try:
        port = parts.port or 80
    except ValueError as exc:
        raise ConfigurationError(f"--url {url!r}: the port is not a number 0-65535") from exc
    if parts.scheme != "http" or not parts.hostname:
        raise ConfigurationError(
            f"--url {url!r}: a prefix-cache reset needs a plain http://HOST:PORT replica"
        )
    return f"http://{parts.hostname}:{port}"


def refuse_loopback(urls: list[str]) -> None:
    """A loopback URL names the pod itself inside the cluster: every request would fail."""
    for url in urls:
        host = urlsplit(url).hostname or ""
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if loopback:
            raise ConfigurationError(
                f"--url {url}: a loopback address means the pod itself inside the cluster",
                hint="give the server's Service DNS name or an address the pods can reach",
            )


def _raise_for_outcome(name: str, outcome: engine.JobOutcome) -> None:
    if outcome.phase != "Completed":
        raise LoadGeneratorError(
            f"AIPerfJob {name} ended {outcome.phase}", hint=f"`aiperf kube logs {name}` shows why"
        )
    if not outcome.results_fetched:
        raise LoadGeneratorError(
            f"AIPerfJob {name} completed but `aiperf kube results` fetched nothing",
            hint="see kube/engine.log in the case directory",
        )


def _translation(
    request: BenchClientRequest, options: KubeOptions, manifests: KubeManifests
) -> dict[str, Any]:
    reset = "before-submit" if request.definition.reset_prefix_cache else None
    return {
        "schema_version": 1,
        "name": manifests.name,
        "namespace": manifests.namespace,
        "operator": options.operator,
        "urls": pod_urls(request, options),
        "prefix_cache_reset": reset,
        "changes": [asdict(change) for change in manifests.changes],
        "pod_config": manifests.config,
    }


def _json(data: object) -> bytes:
    return json.dumps(data, indent=2, sort_keys=True, default=str).encode("utf-8") + b"\n"

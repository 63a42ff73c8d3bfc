"""run_case_on_kube: the local case's AIPerf config as an AIPerfJob, judged as a local case."""

from __future__ import annotations

import ipaddress
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.case.aiperf_config import build_request_body
from inferlab_bench.case.reset import ResetTarget
from inferlab_bench.case.stage import (
    CaseOptions,
    aiperf_dir,
    check_population,
    measure_outputs,
    planned_config,
    reset_before_run,
    reset_target,
)
from inferlab_bench.errors import (
    CaseInterruptedError,
    ConfigurationError,
    DeadlineExceededError,
    InferlabError,
    LoadGeneratorError,
)
from inferlab_bench.kube import engine
from inferlab_bench.kube.manifests import KubeManifests, build_manifests, job_name, pod_urls
from inferlab_bench.kube.options import KubeOptions
from inferlab_bench.protocol import (
    BenchClientRequest,
    BenchClientResult,
    ClientEndpointInput,
    ClientStatus,
    RawArtifact,
)

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


def prepare_kube_case(request: BenchClientRequest, options: KubeOptions) -> PreparedKubeCase:
    """Build the AIPerfJob from the local config, write it, pass ``aiperf kube validate
    --strict``, and for ``--no-operator`` write AIPerf's raw manifests beside it."""
    local_config = planned_config(request, reset_after_warmup=False)
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


def run_case_on_kube(
    request: BenchClientRequest, options: KubeOptions, case_options: CaseOptions | None = None
) -> BenchClientResult:
    """Run one case on Kubernetes; every failure is a failed result listing what was written."""
    deadline = time.monotonic() + request.case_budget_seconds
    artifacts: list[RawArtifact] = []
    command: list[str] = []
    try:
        if options.dry_run:
            raise ConfigurationError("internal: a dry run prepares manifests and runs no case")
        request.artifact_dir.mkdir(parents=True, exist_ok=True)
        # The pods check their copy; this copy is what the records are judged against.
        check_population(request)
        refuse_loopback(pod_urls(request, options))
        target = reset_target(request, case_options or CaseOptions())
        prepared = prepare_kube_case(request, options)
        artifacts += prepared.artifacts
        artifacts.append(_request_body(request))
        if target is not None:
            # Nothing reaches the servers between these resets and the first profiling request
            # (no warmup on Kubernetes with a reset; see refuse_unfaithful).
            artifacts += _reset_every_server(request, options, target)
        outcome = engine.run_job(
            prepared.manifests.name,
            prepared.custom_resource,
            aiperf_dir(request),
            deadline,
            options,
            prepared.directory / ENGINE_LOG,
        )
        artifacts.append(
            RawArtifact(name="kube-engine-log", kind="log", path=prepared.directory / ENGINE_LOG)
        )
        command = list(outcome.submit.argv) if outcome.submit else []
        _raise_for_outcome(prepared.manifests.name, outcome)
    except InferlabError as exc:
        return _failed(str(exc), artifacts, command)
    result = measure_outputs(
        request,
        command=command,
        exit_code=0,
        log_path=prepared.directory / ENGINE_LOG,
        reset_checked=target is not None,
    )
    known = {a.path for a in result.raw_artifacts}
    extra = [a for a in artifacts if a.path not in known and a.path.exists()]
    return result.model_copy(update={"raw_artifacts": [*result.raw_artifacts, *extra]})


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


def _reset_every_server(
    request: BenchClientRequest, options: KubeOptions, target: ResetTarget
) -> list[RawArtifact]:
    """Reset the request's server, then each ``--url`` replica (each has its own cache)."""
    artifacts = reset_before_run(request, target)
    for index, url in enumerate(options.extra_urls, 2):
        replica = request.model_copy(
            update={
                "endpoint": _replica_endpoint(url, request.endpoint),
                "artifact_dir": request.artifact_dir / KUBE_DIR / f"reset-{index}",
            }
        )
        artifacts += reset_before_run(replica, target)
    return artifacts


def _replica_endpoint(url: str, endpoint: ClientEndpointInput) -> ClientEndpointInput:
    parts = urlsplit(url)
    try:
        port = parts.port or 80
    except ValueError as exc:
        raise ConfigurationError(f"--url {url!r}: the port is not a number 0-65535") from exc
    if parts.scheme != "http" or not parts.hostname:
        raise ConfigurationError(
            f"--url {url!r}: a prefix-cache reset needs a plain http://HOST:PORT replica"
        )
    return endpoint.model_copy(update={"host": parts.hostname, "port": port})


def _raise_for_outcome(name: str, outcome: engine.JobOutcome) -> None:
    if outcome.stopped_by == "deadline":
        raise DeadlineExceededError(
            f"AIPerfJob {name}: the case budget ran out before the job ended; cancelled it",
            hint="raise --budget (it covers pod start-up too) or lower --requests",
        )
    if outcome.stopped_by == "signal":
        raise CaseInterruptedError(f"AIPerfJob {name}: stopped by a signal; cancelled it")
    if outcome.phase != "Completed":
        raise LoadGeneratorError(
            f"AIPerfJob {name} ended {outcome.phase}", hint=f"`aiperf kube logs {name}` shows why"
        )
    if not outcome.results_fetched:
        raise LoadGeneratorError(
            f"AIPerfJob {name} completed but `aiperf kube results` fetched nothing",
            hint="see kube/engine.log in the case directory",
        )


def _request_body(request: BenchClientRequest) -> RawArtifact:
    path = request.artifact_dir / "request-body.json"
    write_bytes_atomic(path, _json(build_request_body(request).as_json()))
    return RawArtifact(name="request-body", kind="request_body", path=path)


def _failed(message: str, artifacts: list[RawArtifact], command: list[str]) -> BenchClientResult:
    return BenchClientResult(
        status=ClientStatus.FAILED,
        error=message,
        native_command=command,
        raw_artifacts=[a for a in artifacts if a.path.exists()],
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

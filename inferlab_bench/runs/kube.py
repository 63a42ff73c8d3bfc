"""``--engine kube`` dry runs for run and sweep: manifests written and validated, nothing run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.errors import ConfigurationError
from inferlab_bench.kube.job import prepare_kube_case, refuse_loopback
from inferlab_bench.kube.manifests import pod_urls
from inferlab_bench.kube.options import KubeOptions
from inferlab_bench.layout import REQUEST_FILE
from inferlab_bench.protocol import BenchClientRequest, dump_json


@dataclass(frozen=True)
class DryRunCase:
    """Where one case's manifests were written, and what a real run would still need."""

    directory: Path
    manifests: tuple[Path, ...]
    job_name: str
    notes: tuple[str, ...]


def dry_run(requests: Sequence[BenchClientRequest], options: KubeOptions) -> list[DryRunCase]:
    """Write each case's request.json and manifests (validated by AIPerf); contact nothing."""
    options = replace(options, dry_run=True)
    cases = []
    for request in requests:
        request.artifact_dir.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(request.artifact_dir / REQUEST_FILE, dump_json(request))
        prepared = prepare_kube_case(request, options)
        cases.append(
            DryRunCase(
                directory=request.artifact_dir,
                manifests=tuple(a.path for a in prepared.artifacts),
                job_name=prepared.manifests.name,
                notes=_notes(request, options),
            )
        )
    return cases


def _notes(request: BenchClientRequest, options: KubeOptions) -> tuple[str, ...]:
    try:
        refuse_loopback(pod_urls(request, options))
    except ConfigurationError as exc:
        return (f"a real run would refuse this: {exc.message}",)
    return ()

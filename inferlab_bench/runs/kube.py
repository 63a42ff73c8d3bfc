"""``--engine kube`` for run and sweep: the case runner, and dry runs that only write manifests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.case.stage import CaseOptions
from inferlab_bench.errors import ConfigurationError
from inferlab_bench.kube.manifests import pod_urls
from inferlab_bench.kube.options import KubeOptions
from inferlab_bench.kube.stage import prepare_kube_case, refuse_loopback, run_case_on_kube
from inferlab_bench.protocol import BenchClientRequest, BenchClientResult, dump_json
from inferlab_bench.report.rundir import REQUEST_FILE
from inferlab_bench.runs.execute import CaseRunner


@dataclass(frozen=True)
class DryRunCase:
    """Where one case's manifests were written, and what a real run would still need."""

    directory: Path
    manifests: tuple[Path, ...]
    job_name: str
    notes: tuple[str, ...]


def kube_runner(options: KubeOptions) -> CaseRunner:
    """A runner for ``run_and_save``: each case becomes one AIPerfJob."""
    if options.dry_run:
        raise ConfigurationError("internal: a dry run writes manifests and runs no case")

    def run(request: BenchClientRequest, case_options: CaseOptions) -> BenchClientResult:
        return run_case_on_kube(request, options, case_options)

    return run


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

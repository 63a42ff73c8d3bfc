"""``--engine kube`` flags for run and sweep -> KubeOptions; repeated ``--url``; dry-run output."""

from __future__ import annotations

import argparse
import sys
import typing
from collections.abc import Sequence

from inferlab_bench.cli.options import CaseFlags
from inferlab_bench.cli.render import print_json
from inferlab_bench.kube.options import DEFAULT_IMAGE, KubeOptions
from inferlab_bench.kube.population import PopulationDelivery, PvcDelivery, UrlDelivery
from inferlab_bench.runs.kube import DryRunCase

ENGINES = typing.get_args(CaseFlags.model_fields["engine"].annotation)


def add_kube_flags(parser: argparse.ArgumentParser) -> None:
    """The engine choice and its Kubernetes settings (validated by ``cli.options``)."""
    kube = parser.add_argument_group("engine (docs/kube.md)")
    kube.add_argument("--engine", choices=ENGINES, help="where AIPerf runs (default local)")
    kube.add_argument("--namespace", help="Kubernetes namespace of the AIPerfJob (kube)")
    kube.add_argument("--workers", help="AIPerf worker pods in total (kube)")
    kube.add_argument(
        "--operator",
        action=argparse.BooleanOptionalAction,
        help="submit an AIPerfJob to AIPerf's operator (default), or raw JobSet manifests",
    )
    kube.add_argument(
        "--dry-run", action="store_true", help="write the manifests to --out; contact nothing"
    )
    kube.add_argument("--image", help=f"AIPerf image for the pods (default {DEFAULT_IMAGE})")
    kube.add_argument(
        "--pod-tokenizer", help="tokenizer name the pods load (when --tokenizer is a local path)"
    )
    kube.add_argument(
        "--population-url", help="where the pods download population.jsonl (sha256-checked)"
    )
    kube.add_argument(
        "--population-pvc",
        metavar="CLAIM[:FILE]",
        help="a PersistentVolumeClaim holding the population (FILE default population.jsonl)",
    )
    kube.add_argument("--kubeconfig", help="kubeconfig for aiperf and kubectl")
    kube.add_argument("--kube-name", help="AIPerfJob name (default: derived from the case)")


def kube_options(flags: CaseFlags) -> KubeOptions | None:
    """KubeOptions for ``--engine kube`` (every ``--url`` after the first is a replica);
    None for the local engine."""
    if flags.engine != "kube":
        return None
    assert flags.namespace is not None  # CASE_RULES: --engine kube needs --namespace
    return KubeOptions(
        namespace=flags.namespace,
        workers=flags.workers,
        operator=flags.operator is not False,
        dry_run=flags.dry_run,
        image=flags.image or DEFAULT_IMAGE,
        population=_delivery(flags),
        tokenizer=flags.pod_tokenizer,
        name=flags.kube_name,
        kubeconfig=flags.kubeconfig,
        extra_urls=tuple(flags.url[1:]),
    )


def _delivery(flags: CaseFlags) -> PopulationDelivery | None:
    if flags.population_url:
        return UrlDelivery(flags.population_url)
    if flags.population_pvc:
        claim, _, file = flags.population_pvc.partition(":")
        return PvcDelivery(claim, file or "population.jsonl")
    return None


def render_dry_run(cases: Sequence[DryRunCase], *, as_json: bool) -> int:
    """Say where each case's manifests are; exit 0 (nothing ran, nothing failed)."""
    if as_json:
        print_json(
            {
                "dry_run": True,
                "cases": [
                    {
                        "directory": str(c.directory),
                        "job_name": c.job_name,
                        "manifests": [str(p) for p in c.manifests],
                        "notes": list(c.notes),
                    }
                    for c in cases
                ],
            }
        )
        return 0
    for case in cases:
        print(f"{case.job_name}: manifests in {case.directory / 'kube'}")
        for note in case.notes:
            print(f"  note: {note}", file=sys.stderr)
    print(
        "dry run: validated by `aiperf kube validate --strict`; nothing was submitted",
        file=sys.stderr,
    )
    return 0

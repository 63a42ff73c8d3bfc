"""``reproduce``: re-run every case of a verified bundle against a server, judge each metric.

Each case runs through the same trials workflow as ``run --trials`` (``runs.trials``), with the
bundle's own request: load shape, request body, warmup, SLOs, seed and reset method; only the
server, its model name, the tokenizer directory and where files go are changed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.case.stage import CaseOptions
from inferlab_bench.errors import ReproductionError
from inferlab_bench.prepare.tokens import fingerprint
from inferlab_bench.progress import NULL_PROGRESS, ProgressSink
from inferlab_bench.protocol import (
    BenchClientRequest,
    BenchPopulationInput,
    ClientStatus,
    MeasurementModelInput,
)
from inferlab_bench.publish import comparable
from inferlab_bench.publish.archive import Bundle, read_bundle, unpack
from inferlab_bench.publish.baselines import baseline_document, judge_against, load_baseline
from inferlab_bench.publish.evidence import DOCUMENTED_RESETS, BundleCase
from inferlab_bench.publish.reprepare import reprepare
from inferlab_bench.publish.verdict import DEFAULT_SETTINGS, CaseVerdict, Settings, judge_case
from inferlab_bench.report.rundir import SavedCase, load_case
from inferlab_bench.runs.population import population_facts
from inferlab_bench.runs.requests import Target, endpoint_input
from inferlab_bench.runs.trials import run_trials, trial_dir

REPRODUCTION_FILE = "reproduction.json"
REPRODUCTION_SCHEMA = "inferlab-reproduction-v1"
PUBLISHED_DIR = "published"
REPRODUCED_DIR = "reproduced"
DOCUMENTED_NAMES = frozenset(DOCUMENTED_RESETS.values())


@dataclass(frozen=True)
class ReproduceSettings:
    bundle: Path
    url: str
    served_name: str
    tokenizer: Path
    out: Path
    trials: int = 3
    reprepare: bool = False
    dataset: Path | None = None
    baseline: Path | None = None
    """A peer's result file (vLLM, GuideLLM) to judge the reproduced cases against as well."""
    verdict: Settings = DEFAULT_SETTINGS
    echo: IO[str] | None = None
    prefix_cache_reset: str | None = None
    """``--prefix-cache-reset`` given by the user: the only way a reset call that is none of
    the documented frameworks' is made."""


@dataclass(frozen=True)
class Reproduction:
    directory: Path
    cases: tuple[CaseVerdict, ...]
    document: dict[str, Any]
    against_baseline: tuple[CaseVerdict, ...] = ()


def reproduce(settings: ReproduceSettings, progress: ProgressSink = NULL_PROGRESS) -> Reproduction:
    """Verify and unpack the bundle, re-run each case ``settings.trials`` times, judge it."""
    started = time.monotonic()
    out = settings.out.resolve()
    bundle = read_bundle(settings.bundle)
    plans = plan_cases(bundle, settings, out)  # every path and reset call judged before any write
    baseline = None if settings.baseline is None else load_baseline(settings.baseline)
    published_root = unpack(bundle, out / PUBLISHED_DIR)
    population = _population(bundle, published_root, settings)
    here = fingerprint(str(settings.tokenizer)) if population is not None else None
    verdicts, runs = [], []
    progress.begin(f"reproducing {len(bundle.cases)} cases", len(bundle.cases), unit="cases")
    for case, (directory, reset) in zip(bundle.cases, plans, strict=True):
        published = _published(published_root, case.trials)
        request = rewrite(case.request, settings, population, directory)
        options = CaseOptions(prefix_cache_reset=reset, echo=settings.echo)
        reproduced = run_trials(request, options, settings.trials).trials
        runs.append(reproduced)
        verdicts.append(_judge(case.label, bundle, published, reproduced, here, settings))
        progress.advance()
    progress.end()
    document = _document(bundle, settings, out, verdicts, population, time.monotonic() - started)
    against: tuple[CaseVerdict, ...] = ()
    if baseline is not None:
        against = judge_against(baseline, runs, settings.verdict)
        document["baseline"] = {
            "source": baseline_document(baseline),
            "cases": comparable.as_document(against),
        }
    write_bytes_atomic(out / REPRODUCTION_FILE, orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return Reproduction(out, tuple(verdicts), document, against)


def plan_cases(
    bundle: Bundle, settings: ReproduceSettings, out: Path
) -> list[tuple[Path, str | None]]:
    """Per case: the folder its re-run writes into and the reset option it runs with."""
    plans = []
    for case in bundle.cases:
        reproduced = out / REPRODUCED_DIR / case.path
        folders = [out / PUBLISHED_DIR / name for name in (*case.trials, case.path)]
        folders += [reproduced, *(trial_dir(reproduced, i) for i in range(1, settings.trials + 1))]
        for folder in folders:
            if not folder.resolve().is_relative_to(out):
                raise ReproductionError(
                    f"{bundle.path}: case {case.path} would be written at {folder}, "
                    f"which resolves outside --out {out}",
                    hint="remove the link in the --out folder, or use an empty --out",
                )
        plans.append((reproduced, reset_option(bundle, case, settings)))
    return plans


def reset_option(bundle: Bundle, case: BundleCase, settings: ReproduceSettings) -> str | None:
    """The documented reset the case's evidence records, or the user's own; never the bundle's
    own choice of an HTTP call."""
    if not case.request.definition.reset_prefix_cache:
        return None
    if settings.prefix_cache_reset is not None:
        return settings.prefix_cache_reset
    if case.reset is None:
        return None  # the case stage asks the server what it is, as for `run`
    if case.reset.framework is None:
        raise ReproductionError(
            f"{bundle.path}: case {case.path} records the reset call {case.reset.text!r}, "
            f"which is none of the documented ones ({', '.join(sorted(DOCUMENTED_NAMES))})",
            hint="a bundle never chooses an HTTP call on your server: pass "
            "--reset-prefix-cache with the call your server needs",
        )
    return case.reset.framework


def rewrite(
    request: BenchClientRequest,
    settings: ReproduceSettings,
    population: BenchPopulationInput | None,
    artifact_dir: Path,
) -> BenchClientRequest:
    """The published request aimed at this server, tokenizer, population copy and directory."""
    endpoint = request.endpoint
    target = Target(
        settings.url,
        settings.served_name,
        str(settings.tokenizer),
        chat_completions_path=endpoint.chat_completions_path,
        completions_path=endpoint.completions_path,
    )
    return request.model_copy(
        update={
            "endpoint": endpoint_input(target),
            "model": MeasurementModelInput(
                locator=str(settings.tokenizer.resolve()), served_name=settings.served_name
            ),
            "population": population if request.population is not None else None,
            "artifact_dir": artifact_dir,
        }
    )


def _population(
    bundle: Bundle, published_root: Path, settings: ReproduceSettings
) -> BenchPopulationInput | None:
    entry = bundle.index.get("population")
    if entry is None:
        if settings.reprepare:
            raise ReproductionError(
                "--reprepare: the bundle's cases use synthetic prompts, there is no population",
                hint="drop --reprepare",
            )
        return None
    if settings.reprepare:
        path = reprepare(bundle, settings.tokenizer, settings.dataset, settings.out.resolve())
    else:
        path = published_root / entry["path"]
    facts = population_facts(path)
    if facts.sha256 != entry["sha256"]:  # reprepare checks this itself; the copy cannot differ
        raise ReproductionError(f"{path}: sha256 {facts.sha256}, the bundle's is {entry['sha256']}")
    return facts


def _published(root: Path, trials: Sequence[str]) -> tuple[SavedCase, ...]:
    return tuple(load_case(root / t, inside=root) for t in trials)


def _judge(
    label: str,
    bundle: Bundle,
    published: Sequence[SavedCase],
    reproduced: Sequence[SavedCase],
    here: str | None,
    settings: ReproduceSettings,
) -> CaseVerdict:
    published, reproduced = _succeeded(published), _succeeded(reproduced)
    entry = bundle.index.get("population") or {}
    recorded = (entry.get("preparation") or {}).get("tokenizer_fingerprint")
    a = comparable.identity(published, recorded if here is not None else None)
    b = comparable.identity(reproduced, here)
    return judge_case(
        label,
        comparable.side(published),
        comparable.side(reproduced),
        not_comparable=comparable.differences(a, b),
        caveats=comparable.caveats(a, b),
        settings=settings.verdict,
    )


def _succeeded(cases: Sequence[SavedCase]) -> Sequence[SavedCase]:
    """The trials that succeeded (all of them when none did: the verdict then says so)."""
    return [c for c in cases if c.result.status is ClientStatus.SUCCEEDED] or cases


def _document(
    bundle: Bundle,
    settings: ReproduceSettings,
    out: Path,
    verdicts: Sequence[CaseVerdict],
    population: BenchPopulationInput | None,
    seconds: float,
) -> dict[str, Any]:
    return {
        "schema_name": REPRODUCTION_SCHEMA,
        "schema_version": 1,
        "bundle": str(settings.bundle.resolve()),
        "bundle_source": bundle.index.get("source"),
        "published": str(out / PUBLISHED_DIR),
        "reproduced": str(out / REPRODUCED_DIR),
        "server": {"url": settings.url, "model": settings.served_name},
        "tokenizer": str(settings.tokenizer.resolve()),
        "population_sha256": None if population is None else population.sha256,
        "published_trials_recomputed": bundle.recomputed,
        "published_trials": bundle.trials,
        "reprepared": settings.reprepare,
        "trials": settings.trials,
        "confidence": settings.verdict.confidence,
        "tolerance": settings.verdict.tolerance,
        "wall_seconds": round(seconds, 3),
        "cases": [
            {**comparable.as_document(v), "directory": case.path}
            for v, case in zip(verdicts, bundle.cases, strict=True)
        ],
    }

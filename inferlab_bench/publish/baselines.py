"""A peer's result file as the published side of a comparison: each of our cases judged
against the peer's benchmark at the same load (the readers live in ``publish.peers``).

What maps (docs/reproduce.md has the table): TTFT, TPOT (vLLM's and SGLang's per-request
TPOT and GuideLLM's per-request inter-token latency are all AIPerf's per-request
inter_token_latency: (E2E - TTFT) / (output tokens - 1)), E2E, output and request
throughput, goodput (vLLM with ``--goodput``). Pooled ITLs have no counterpart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inferlab_bench.errors import BaselineError, BundleError
from inferlab_bench.publish import comparable
from inferlab_bench.publish.comparable import Identity
from inferlab_bench.publish.contents import case_groups
from inferlab_bench.publish.peers import (
    FORMATS,
    Baseline,
    BaselineCase,
    load_baseline,
    peer_kind,
    unrecognised,
)
from inferlab_bench.publish.peers.documents import read_documents
from inferlab_bench.publish.verdict import (
    DEFAULT_SETTINGS,
    CaseVerdict,
    Settings,
    Side,
    judge_case,
)
from inferlab_bench.report.rundir import SavedCase, load_case, load_trials

__all__ = [
    "FORMATS",
    "Baseline",
    "BaselineCase",
    "baseline_document",
    "foreign_file",
    "judge_against",
    "load_baseline",
    "our_cases",
    "peer_kind",
]


def side(case: BaselineCase) -> Side:
    """The verdict module's view of a peer's case: each run's figures, per-request values
    when the file keeps every request its figures count."""
    return Side(tuple(case.runs), () if case.samples is None else case.samples)


def identity(case: BaselineCase) -> Identity:
    return Identity(
        served_name=case.model,
        tokenizer_fingerprint=None,
        population_sha256=None,
        load=case.label,
        requests=None,  # a peer's count is noted, not held against it
        warmup=None,
        verdicts={},
        failed=False,
    )


def judge_against(
    baseline: Baseline, cases: Sequence[Sequence[SavedCase]], settings: Settings = DEFAULT_SETTINGS
) -> tuple[CaseVerdict, ...]:
    """Each of our cases (its trials) against the peer's benchmark at the same load."""
    verdicts = []
    for trials in cases:
        ours = comparable.identity(trials, None)
        label = ours.load or "?"
        matches = [c for c in baseline.cases if c.label == label]
        if len(matches) != 1:
            verdicts.append(
                judge_case(
                    label,
                    Side(()),
                    comparable.side(trials),
                    not_comparable=[_no_match(baseline, label, len(matches))],
                    settings=settings,
                )
            )
            continue
        (peer,) = matches
        verdicts.append(
            judge_case(
                peer.label,
                side(peer),
                comparable.side(trials),
                not_comparable=[*refusals(peer), *comparable.differences(identity(peer), ours)],
                caveats=_caveats(baseline, peer, trials),
                settings=settings,
            )
        )
    return tuple(verdicts)


def foreign_file(path: Path) -> None:
    """Refuse a file that is neither ours nor a peer's, listing the formats read (instead of
    letting it fail as a malformed result of ours)."""
    if not path.is_file() or path.name.endswith(".tar.gz") or peer_kind(path) is not None:
        return
    documents = read_documents(path)  # unreadable: say so (size, encoding, syntax)
    data = documents.items[0] if len(documents.items) == 1 else None
    if not (isinstance(data, dict) and "schema_version" in data):
        raise unrecognised(path)


def refusals(case: BaselineCase) -> list[str]:
    """Why a peer's case cannot be compared at all, in words."""
    out = list(case.refusals)
    if not case.model:
        out.append("the file names no model, so the served model cannot be checked against ours")
    return out


def _no_match(baseline: Baseline, label: str, found: int) -> str:
    have = ", ".join(dict.fromkeys(c.label for c in baseline.cases))
    if found == 0:
        return f"{baseline.path.name} has no benchmark at {label} ({have})"
    return (
        f"{baseline.path.name} has {found} benchmarks at {label} (different runs of one load); "
        "keep the one you mean in a file of its own"
    )


def our_cases(path: Path) -> list[tuple[SavedCase, ...]]:
    """Our side of a comparison: each case of a run, sweep or trials folder, with its trials."""
    if path.is_file():
        return [(load_case(path),)]
    try:
        groups = case_groups(path)
    except BundleError as exc:
        raise BaselineError(exc.message, hint=exc.hint) from exc
    return [
        load_trials(g.directory) if len(g.trials) > 1 else (load_case(g.trials[0]),) for g in groups
    ]


def _caveats(baseline: Baseline, peer: BaselineCase, trials: Sequence[SavedCase]) -> list[str]:
    request = trials[0].request
    out = [f"published side: {baseline.tool} {baseline.version or ''}".rstrip()]
    if request is not None and request.population is not None:
        out.append(f"{baseline.tool} sent its own prompts, not our population")
    if request is not None and peer.requests not in (None, request.case.request_count):
        out.append(
            f"request count: {baseline.tool} {peer.requests}, ours {request.case.request_count}"
        )
    out += list(peer.notes)
    out += [f"not mapped: {u}" for u in peer.unmapped]
    return out


def baseline_document(baseline: Baseline) -> dict[str, Any]:
    return {
        "tool": baseline.tool,
        "version": baseline.version,
        "path": str(baseline.path),
        "format": baseline.format,
        "cases": [
            {
                "label": c.label,
                "model": c.model,
                "requests": c.requests,
                "metrics": c.metrics,
                "runs": len(c.runs),
                "per_request_values": c.samples is not None,
                "refusals": refusals(c),
                "notes": list(c.notes),
                "unmapped": list(c.unmapped),
            }
            for c in baseline.cases
        ],
    }

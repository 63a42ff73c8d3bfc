"""Repeated trials of one case on the same frozen population, and their summary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.case.engine import LoadEngine
from inferlab_bench.case.stage import CaseOptions
from inferlab_bench.layout import TRIALS_FILE
from inferlab_bench.protocol import BenchClientRequest, ClientStatus
from inferlab_bench.report.rundir import SavedCase
from inferlab_bench.runs.execute import run_and_save
from inferlab_bench.validity.trials import MetricSummary, summarize_trials


@dataclass(frozen=True)
class TrialsOutcome:
    directory: Path
    trials: tuple[SavedCase, ...]
    summaries: tuple[MetricSummary, ...]


def trial_dir(root: Path, index: int) -> Path:
    return root / f"trial-{index:02d}"


def run_trials(
    request: BenchClientRequest,
    options: CaseOptions,
    count: int,
    engine: LoadEngine | None = None,
) -> TrialsOutcome:
    """Run the case ``count`` times (trial-01, trial-02, ...) and summarize the successes."""
    root = request.artifact_dir
    trials = tuple(
        run_and_save(
            request.model_copy(update={"artifact_dir": trial_dir(root, i)}), options, engine
        )
        for i in range(1, count + 1)
    )
    summaries = summarize_saved(trials)
    write_bytes_atomic(
        root / TRIALS_FILE,
        orjson.dumps(
            {
                "schema_version": 1,
                "trials": [t.directory.name for t in trials],
                "succeeded": [t.directory.name for t in trials if _ok(t)],
                "summaries": [s.model_dump(mode="json") for s in summaries],
            },
            option=orjson.OPT_INDENT_2,
        ),
    )
    return TrialsOutcome(root, trials, summaries)


def summarize_saved(trials: Sequence[SavedCase]) -> tuple[MetricSummary, ...]:
    return summarize_trials([t.result.metrics for t in trials if _ok(t)])


def _ok(case: SavedCase) -> bool:
    return case.result.status is ClientStatus.SUCCEEDED

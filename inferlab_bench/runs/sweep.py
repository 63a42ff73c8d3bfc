"""A sweep: one case per load point on one population, saved side by side, with plots."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.case.engine import LoadEngine
from inferlab_bench.case.stage import CaseOptions
from inferlab_bench.layout import SWEEP_FILE
from inferlab_bench.load import Load
from inferlab_bench.progress import NULL_PROGRESS, ProgressSink
from inferlab_bench.protocol import BenchClientRequest, BenchLoadInput
from inferlab_bench.report.figures import case_plots
from inferlab_bench.report.rundir import SavedCase
from inferlab_bench.report.tables import load_label
from inferlab_bench.runs.execute import run_and_save
from inferlab_bench.runs.trials import run_trials


@dataclass(frozen=True)
class SweepOutcome:
    directory: Path
    cases: tuple[SavedCase, ...]
    plots: tuple[Path, ...]


def case_dir(root: Path, index: int, load: BenchLoadInput) -> Path:
    return root / f"{index:02d}-{Load.of(load).slug}"


def sweep_requests(
    base: BenchClientRequest, loads: Sequence[BenchLoadInput], root: Path
) -> list[BenchClientRequest]:
    """``base`` at every load, each with its own directory under ``root``."""
    return [
        base.model_copy(
            update={
                "artifact_dir": case_dir(root, index, load),
                "case": base.case.model_copy(update={"load_shape": load}),
            }
        )
        for index, load in enumerate(loads, 1)
    ]


def run_sweep(
    base: BenchClientRequest,
    loads: Sequence[BenchLoadInput],
    options: CaseOptions,
    root: Path,
    trials: int = 1,
    progress: ProgressSink = NULL_PROGRESS,
    engine: LoadEngine | None = None,
) -> SweepOutcome:
    """Run ``base`` at every load in order (each in its own directory) and plot the sweep."""
    cases = []
    progress.begin(f"sweep of {len(loads)} cases", len(loads), unit="cases")
    for request in sweep_requests(base, loads, root):
        if trials > 1:
            cases.append(run_trials(request, options, trials, engine).trials[0])
        else:
            cases.append(run_and_save(request, options, engine))
        progress.advance()
    progress.end()
    write_bytes_atomic(root / SWEEP_FILE, _index(cases))
    return SweepOutcome(root, tuple(cases), case_plots(cases, root / "plots"))


def _index(cases: Sequence[SavedCase]) -> bytes:
    rows = [
        {
            "directory": c.directory.name,
            "load": load_label(c.request),
            "status": c.result.status.value,
        }
        for c in cases
    ]
    return orjson.dumps({"schema_version": 1, "cases": rows}, option=orjson.OPT_INDENT_2)

"""One probe: the search's load run as an ordinary case (``runs.execute.run_and_save``), and
the figures the judgement needs read back from its directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from inferlab_bench.capacity.judge import ProbeFigures
from inferlab_bench.case.engine import LoadEngine
from inferlab_bench.case.stage import CaseOptions
from inferlab_bench.layout import RECORDS_PARQUET
from inferlab_bench.metric_tags import LATENCIES_MS
from inferlab_bench.protocol import BenchClientRequest
from inferlab_bench.report.rundir import SavedCase
from inferlab_bench.runs.execute import run_and_save
from inferlab_bench.validity import ValidityDocument, failed_check_text


def run_probe(
    request: BenchClientRequest, options: CaseOptions, engine: LoadEngine | None
) -> ProbeFigures:
    """Run the case into ``request.artifact_dir`` and read what judging it needs."""
    return figures_of(run_and_save(request, options, engine))


def figures_of(case: SavedCase) -> ProbeFigures:
    result = case.result
    document = _validity(case.validity)
    latencies, succeeded = _columns(case.directory / RECORDS_PARQUET)
    slo = result.request_slo
    return ProbeFigures(
        status=result.status.value,
        error=result.error,
        verdicts={} if document is None else {k: v.value for k, v in document.verdicts.items()},
        failed_checks=()
        if document is None
        else tuple(failed_check_text(c) for c in document.failed_checks()),
        latencies=latencies,
        succeeded=succeeded,
        good_ratio=None if slo is None else slo.good_request_ratio,
        goodput=None if slo is None else slo.goodput,
        request_throughput=_metric(result.metrics, "request_throughput"),
        certified={}
        if document is None
        else {claim.metric: claim.certified for claim in document.slo_bounds},
        verdict=None if document is None else document.verdict.value,
    )


def _validity(raw: dict[str, Any] | None) -> ValidityDocument | None:
    return None if raw is None else ValidityDocument.model_validate(raw)


def _columns(path: Path) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per profiling request: our latency columns (NaN where absent) and whether it succeeded."""
    if not path.is_file():
        return {}, np.zeros(0, dtype=bool)
    table = pq.read_table(path)
    names = set(table.column_names)
    failed = np.asarray(table.column("has_error"), dtype=bool) | np.asarray(
        table.column("was_cancelled"), dtype=bool
    )
    latencies = {
        name: np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)
        for name in LATENCIES_MS
        if name in names
    }
    return latencies, ~failed


def _metric(metrics: object, name: str) -> float | None:
    value = metrics.get(name) if isinstance(metrics, dict) else None
    return float(value) if isinstance(value, int | float) else None

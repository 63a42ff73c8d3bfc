"""Plots of saved cases: per-request latency CDFs and, for several loads, the sweep curves."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from inferlab_bench.layout import RECORDS_PARQUET
from inferlab_bench.load import Load
from inferlab_bench.protocol import BenchLoadInput, ClientStatus
from inferlab_bench.report import plots
from inferlab_bench.report.rundir import SavedCase
from inferlab_bench.report.tables import load_label

LATENCY_COLUMNS = ("ttft_ms", "tpot_ms", "request_latency_ms")


def load_value(load: BenchLoadInput) -> float:
    level = Load.of(load).level
    return float("inf") if level is None else level


def case_plots(cases: Sequence[SavedCase], directory: Path) -> tuple[Path, ...]:
    """Latency CDFs of every case, and the throughput/latency and goodput/load curves."""
    done = [c for c in cases if c.result.status is ClientStatus.SUCCEEDED]
    if not done:
        return ()
    series = {load_label(c.request): latency_samples(c) for c in done}
    made = [plots.latency_cdfs(series, directory / "latency-cdf.png")]
    points = [_point(c) for c in done]
    if len(points) > 1:
        made.append(plots.sweep_curves(points, _load_axis(done[0]), directory / "sweep.png"))
    return tuple(made)


def _point(case: SavedCase) -> plots.SweepPoint:
    m = case.result.metrics
    load = case.request.case.load_shape if case.request else None
    return plots.SweepPoint(
        label=load_label(case.request),
        load=load_value(load) if load is not None else 0.0,
        request_throughput=m.get("request_throughput", 0.0),
        output_throughput=m.get("output_throughput", 0.0),
        p50_ttft_ms=m.get("p50_ttft_ms"),
        p99_ttft_ms=m.get("p99_ttft_ms"),
        p50_request_latency_ms=m.get("p50_request_latency_ms"),
        goodput=m.get("goodput"),
    )


def latency_samples(case: SavedCase) -> dict[str, np.ndarray]:
    """Per-request TTFT / TPOT / E2E (ms) of successful profiling requests, for CDF plots."""
    parquet = case.directory / RECORDS_PARQUET
    if not parquet.is_file():
        return {}
    table = pq.read_table(parquet)
    ok = ~np.asarray(table.column("has_error").to_numpy(zero_copy_only=False), dtype=bool)
    out: dict[str, np.ndarray] = {}
    for name in LATENCY_COLUMNS:
        if name in table.column_names:
            values = np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=float)[ok]
            out[name] = values[np.isfinite(values)]
    return out


def _load_axis(case: SavedCase) -> str:
    if case.request is None:
        return "request rate (req/s)"
    return Load.of(case.request.case.load_shape).axis

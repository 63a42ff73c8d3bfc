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
from inferlab_bench.report.tables import load_label, uncertified
from inferlab_bench.validity.trials import summarize

LATENCY_COLUMNS = ("ttft_ms", "tpot_ms", "request_latency_ms")


def load_value(load: BenchLoadInput) -> float:
    level = Load.of(load).level
    return float("inf") if level is None else level


def case_plots(cases: Sequence[SavedCase], directory: Path) -> tuple[Path, ...]:
    """Latency CDFs of every case; for several loads the throughput/latency and goodput/load
    curves, for trials at one load each trial against the mean and its interval."""
    done = [c for c in cases if c.result.status is ClientStatus.SUCCEEDED]
    if not done:
        return ()
    labels = [load_label(c.request) for c in done]
    distinct = len(set(labels)) == len(labels)
    names = (
        labels if distinct else [f"{c.label} ({lab})" for c, lab in zip(done, labels, strict=True)]
    )
    what = plot_title(done)
    series = {name: latency_samples(c) for name, c in zip(names, done, strict=True)}
    made = [plots.latency_cdfs(series, directory / "latency-cdf.png", f"{what}: latency CDFs")]
    points = [_point(c) for c in done]
    if len(points) > 1 and distinct:
        made.append(plots.sweep_curves(points, _load_axis(done[0]), directory / "sweep.png", what))
    elif len(points) > 1:
        figure = plots.trials_figure(points, _intervals(done), what)
        made.append(plots.save(figure, directory / "trials.png"))
    return tuple(made)


def plot_title(cases: Sequence[SavedCase]) -> str:
    """What the plots show, named by the command that made it: ``run --trials: 3 trials at
    c=4``, ``sweep: c=1, c=4, c=16`` or ``run: c=4``."""
    labels = [load_label(c.request) for c in cases]
    if len(cases) > 1 and len(set(labels)) == 1:
        return f"run --trials: {len(cases)} trials at {labels[0]}"
    if len(cases) > 1:
        return f"sweep: {', '.join(labels)}"
    return f"run: {labels[0]}" if labels else "run"


def _intervals(cases: Sequence[SavedCase]) -> dict[str, plots.Interval]:
    """Each plotted metric's mean and 95% interval over the trials (as trials.json has them)."""
    found = {}
    for key in ("output_throughput", *(attr for attr, _ in plots.LATENCY_SERIES)):
        values = [c.result.metrics.get(key) for c in cases]
        if all(v is not None for v in values):
            s = summarize(key, [float(v) for v in values if v is not None])
            found[key] = plots.Interval(s.mean, s.ci_low, s.ci_high)
    return found


def _point(case: SavedCase) -> plots.SweepPoint:
    m = case.result.metrics
    load = case.request.case.load_shape if case.request else None
    verdict = (case.validity or {}).get("verdict")
    return plots.SweepPoint(
        label=load_label(case.request),
        load=load_value(load) if load is not None else 0.0,
        request_throughput=m.get("request_throughput", 0.0),
        output_throughput=m.get("output_throughput", 0.0),
        p50_ttft_ms=m.get("p50_ttft_ms"),
        p99_ttft_ms=m.get("p99_ttft_ms"),
        p50_request_latency_ms=m.get("p50_request_latency_ms"),
        goodput=m.get("goodput"),
        valid=None if verdict is None else verdict == "pass",
        uncertified=frozenset(f"{stat}_{key}" for key, stat in uncertified(case.validity)),
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

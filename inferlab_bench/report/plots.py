"""PNG plots (matplotlib, headless): latency CDFs per case, and sweep curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from inferlab_bench.atomic import atomic_writer

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CDF_METRICS = (
    ("ttft_ms", "TTFT (ms)"),
    ("tpot_ms", "inter-token latency (ms)"),
    ("request_latency_ms", "end-to-end latency (ms)"),
)

Samples = Mapping[str, npt.NDArray[np.float64]]


@dataclass(frozen=True)
class SweepPoint:
    label: str
    load: float
    request_throughput: float
    output_throughput: float
    p50_ttft_ms: float | None
    p99_ttft_ms: float | None
    p50_request_latency_ms: float | None
    goodput: float | None


def latency_cdfs(series: Mapping[str, Samples], path: Path, title: str = "") -> Path:
    """One panel per latency metric; one empirical CDF line per case."""
    present = [
        (k, label) for k, label in CDF_METRICS if any(k in s and len(s[k]) for s in series.values())
    ]
    fig, axes = _pyplot().subplots(
        1, max(len(present), 1), figsize=(5 * max(len(present), 1), 4), squeeze=False
    )
    for ax, (key, label) in zip(axes[0], present, strict=False):
        for case_label, samples in series.items():
            values = np.sort(np.asarray(samples.get(key, []), dtype=float))
            if len(values):
                ax.step(
                    values,
                    np.arange(1, len(values) + 1) / len(values),
                    where="post",
                    label=case_label,
                )
        ax.set_xlabel(label)
        ax.set_ylabel("fraction of requests")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(title or "latency CDFs")
    return _save(fig, path)


def sweep_curves(points: Sequence[SweepPoint], load_name: str, path: Path) -> Path:
    """Throughput vs latency (the serving trade-off) and goodput vs offered load."""
    fig, (left, right) = _pyplot().subplots(1, 2, figsize=(11, 4))
    ordered = sorted(points, key=lambda p: p.load)
    thr = [p.output_throughput for p in ordered]
    for attr, label in (
        ("p50_ttft_ms", "TTFT p50"),
        ("p99_ttft_ms", "TTFT p99"),
        ("p50_request_latency_ms", "E2E p50"),
    ):
        ys = [getattr(p, attr) for p in ordered]
        if all(y is not None for y in ys):
            left.plot(thr, ys, marker="o", label=label)
    for p in ordered:
        left.annotate(
            p.label, (p.output_throughput, p.p50_request_latency_ms or 0), fontsize="x-small"
        )
    left.set_xlabel("output throughput (tok/s)")
    left.set_ylabel("latency (ms)")
    left.grid(alpha=0.3)
    left.legend(fontsize="small")
    loads = [p.load for p in ordered]
    right.plot(
        loads, [p.request_throughput for p in ordered], marker="o", label="throughput (req/s)"
    )
    if all(p.goodput is not None for p in ordered):
        right.plot(loads, [p.goodput for p in ordered], marker="s", label="goodput (req/s)")
    right.set_xlabel(load_name)
    right.set_ylabel("requests / s")
    right.grid(alpha=0.3)
    right.legend(fontsize="small")
    fig.suptitle("sweep")
    return _save(fig, path)


def _pyplot() -> Any:
    """matplotlib's pyplot, headless, imported on the first plot (0.3 s: not at start-up)."""
    import matplotlib

    matplotlib.use("Agg")  # never needs a display; must precede pyplot
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    with atomic_writer(path) as handle:
        fig.savefig(handle, format="png", dpi=110)
    _pyplot().close(fig)
    return path

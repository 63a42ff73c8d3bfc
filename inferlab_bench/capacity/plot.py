"""The capacity plot: each SLO metric vs load with its bound, attainment, capacity marked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inferlab_bench.atomic import atomic_writer
from inferlab_bench.capacity.answer import Answer, Probe
from inferlab_bench.capacity.spec import SearchSpec

TITLES = {
    "ttft_ms": "TTFT (ms)",
    "tpot_ms": "inter-token latency (ms)",
    "request_latency_ms": "end-to-end latency (ms)",
}


def capacity_plot(spec: SearchSpec, answer: Answer, probes: Sequence[Probe], path: Path) -> Path:
    """One panel per SLO metric (its value at the criterion's share, and the bound) and one
    of attainment; counted probes as dots, invalid ones as crosses, capacity dashed."""
    plt = _pyplot()
    names = [m.metric for m in probes[0].judgement.metrics] if probes else []
    panels = len(names) + 1
    fig, axes = plt.subplots(1, panels, figsize=(4.5 * panels, 4), squeeze=False)
    share = f"p{spec.criterion.ratio * 100:g}"
    for ax, name in zip(axes[0], names, strict=False):
        _series(ax, probes, lambda p, n=name: _value(p, n))
        bound = next(m.bound_ms for m in probes[0].judgement.metrics if m.metric == name)
        ax.axhline(bound, color="tab:red", linewidth=1, label=f"bound {bound:g} ms")
        ax.set_ylabel(f"{TITLES.get(name, name)} at {share}")
        _finish(ax, spec, answer)
    ax = axes[0][-1]
    _series(ax, probes, lambda p: p.judgement.attainment)
    if spec.criterion.kind == "attainment":
        ax.axhline(spec.criterion.ratio, color="tab:red", linewidth=1, label="target")
    ax.set_ylabel("requests within every bound (share)")
    _finish(ax, spec, answer)
    fig.suptitle(answer.message[:120], fontsize="small")
    fig.tight_layout()
    with atomic_writer(path) as handle:
        fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)
    return path


def _value(probe: Probe, name: str) -> float | None:
    return next((m.value for m in probe.judgement.metrics if m.metric == name), None)


def _series(ax: Any, probes: Sequence[Probe], value: Any) -> None:
    counted = sorted((p for p in probes if p.counted), key=lambda p: p.load)
    points = [(p.load, value(p)) for p in counted if value(p) is not None]
    if points:
        ax.plot(*zip(*points, strict=True), marker="o", label="counted probe")
    invalid = [(p.load, value(p)) for p in probes if not p.counted and value(p) is not None]
    if invalid:
        ax.scatter(*zip(*invalid, strict=True), marker="x", color="grey", label="invalid probe")


def _finish(ax: Any, spec: SearchSpec, answer: Answer) -> None:
    if spec.high / spec.low > 16:
        from matplotlib.ticker import ScalarFormatter  # loaded with pyplot already

        ax.set_xscale("log", base=2)  # the planners double: equal steps per doubling
        ax.xaxis.set_major_formatter(ScalarFormatter())
    if answer.capacity is not None:
        ax.axvline(answer.capacity, color="tab:green", linestyle="--", label="capacity")
    ax.set_xlabel("concurrency" if spec.axis.value == "concurrency" else "request rate (req/s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small")


def _pyplot() -> Any:
    """matplotlib's pyplot, headless, imported on the first plot (not at start-up)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt

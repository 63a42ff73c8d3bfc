"""The capacity plot: each SLO metric vs load with its bound, attainment, capacity marked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from inferlab_bench.capacity.answer import Answer, Probe
from inferlab_bench.capacity.spec import SearchSpec
from inferlab_bench.report import plots

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

TITLES = {
    "ttft_ms": "TTFT (ms)",
    "tpot_ms": "inter-token latency (ms)",
    "request_latency_ms": "end-to-end latency (ms)",
}
Value = Callable[[Probe], "float | None"]


def capacity_plot(spec: SearchSpec, answer: Answer, probes: Sequence[Probe], path: Path) -> Path:
    return plots.save(capacity_figure(spec, answer, probes), path)


def capacity_figure(spec: SearchSpec, answer: Answer, probes: Sequence[Probe]) -> Figure:
    """One panel per SLO metric (its value at the criterion's share, and the bound) and one
    of attainment; counted probes as dots, invalid ones hollow and labelled, a value whose
    share the sample size does not certify starred, capacity dashed."""
    names = [m.metric for m in probes[0].judgement.metrics] if probes else []
    panels = len(names) + 1
    fig: Figure
    fig, axes = plots.pyplot().subplots(1, panels, figsize=(4.5 * panels, 4.4), squeeze=False)
    share = f"p{spec.criterion.ratio * 100:g}"
    for ax, name in zip(axes[0], names, strict=False):
        _series(ax, probes, _metric_value(name), _metric_uncertified(name))
        bound = next(m.bound_ms for m in probes[0].judgement.metrics if m.metric == name)
        ax.axhline(bound, color="tab:red", linewidth=1, label=f"bound {bound:g} ms")
        ax.set_ylabel(f"{TITLES.get(name, name)} at {share}")
        _finish(ax, spec, answer)
    ax = axes[0][-1]
    _series(ax, probes, lambda p: p.judgement.attainment, lambda p: False)
    if spec.criterion.kind == "attainment":
        ax.axhline(spec.criterion.ratio, color="tab:red", linewidth=1, label="target")
    ax.set_ylabel("requests within every bound (share)")
    _finish(ax, spec, answer)
    notes = ["hollow: probe invalid (validity failed), not counted"]
    if any(_uncertified(p, n) for p in probes for n in names):
        notes.append(f"*: {share} not certified by the sample size")
    fig.text(0.01, 0.01, "; ".join(notes), fontsize="x-small", color="dimgray")
    fig.suptitle(f"capacity: {answer.message}"[:140], fontsize="small")
    return fig


def _metric_value(name: str) -> Value:
    return lambda probe: _value(probe, name)


def _metric_uncertified(name: str) -> Callable[[Probe], bool]:
    return lambda probe: _uncertified(probe, name)


def _value(probe: Probe, name: str) -> float | None:
    return next((m.value for m in probe.judgement.metrics if m.metric == name), None)


def _uncertified(probe: Probe, name: str) -> bool:
    return any(m.metric == name and m.certified is False for m in probe.judgement.metrics)


def _series(
    ax: Axes, probes: Sequence[Probe], value: Value, shaky: Callable[[Probe], bool]
) -> None:
    counted = sorted((p for p in probes if p.counted), key=lambda p: p.load)
    points = [(p, v) for p in counted if (v := value(p)) is not None]
    color = "tab:blue"
    if points:
        ax.plot(
            [p.load for p, _ in points],
            [v for _, v in points],
            color=color,
            zorder=2,
            label="counted probe",
        )
    for p in probes:
        v = value(p)
        if v is None:
            continue
        starred = shaky(p)
        ax.plot(
            [p.load],
            [v],
            linestyle="none",
            marker="*" if starred else "o",
            markersize=11 if starred else (6 if p.counted else 10),
            markeredgecolor=color if p.counted else "grey",
            markerfacecolor=color if p.counted else "none",
            zorder=3,
        )
        if not p.counted:
            ax.annotate(
                f"{p.label} {plots.INVALID_LABEL}",
                (p.load, v),
                xytext=(4, 4),
                textcoords="offset points",
                fontsize="x-small",
                gid="point-label",
            )


def _finish(ax: Axes, spec: SearchSpec, answer: Answer) -> None:
    if spec.high / spec.low > 16:
        from matplotlib.ticker import ScalarFormatter  # loaded with pyplot already

        ax.set_xscale("log", base=2)  # the planners double: equal steps per doubling
        ax.xaxis.set_major_formatter(ScalarFormatter())
    if answer.capacity is not None:
        ax.axvline(answer.capacity, color="tab:green", linestyle="--", label="capacity")
    ax.set_xlabel("concurrency" if spec.axis.value == "concurrency" else "request rate (req/s)")
    ax.margins(x=0.12, y=0.15)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", loc="best")

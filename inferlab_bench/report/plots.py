"""PNG plots (matplotlib, headless): latency CDFs, sweep curves and trials, carrying verdicts.

What the text says the pictures say too: an invalid case is a hollow marker labelled
``invalid``; an uncertified percentile is a star on a dashed line; titles name the command;
point labels are moved until none overlaps another or leaves its axes; axes start at zero,
and trials at one load show their confidence interval instead of a zoomed-in trend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from inferlab_bench.atomic import atomic_writer

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation

CDF_METRICS = (
    ("ttft_ms", "TTFT (ms)"),
    ("tpot_ms", "inter-token latency (ms)"),
    ("request_latency_ms", "end-to-end latency (ms)"),
)
LATENCY_SERIES = (
    ("p50_ttft_ms", "TTFT p50"),
    ("p99_ttft_ms", "TTFT p99"),
    ("p50_request_latency_ms", "E2E p50"),
)
UNCERTIFIED_MARKER = "*"
INVALID_LABEL = "invalid"

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
    valid: bool | None = None
    """The case's validity verdict (None: not judged)."""
    uncertified: frozenset[str] = field(default_factory=frozenset)
    """Metric keys (``p99_ttft_ms``) whose sample size does not certify them."""


@dataclass(frozen=True)
class Interval:
    """A trials' mean and its confidence interval (None bounds: below two trials)."""

    mean: float
    low: float | None
    high: float | None


def latency_cdfs(series: Mapping[str, Samples], path: Path, title: str = "") -> Path:
    return save(cdf_figure(series, title), path)


def cdf_figure(series: Mapping[str, Samples], title: str = "") -> Figure:
    """One panel per latency metric; one empirical CDF line per case."""
    present = [
        (k, label) for k, label in CDF_METRICS if any(k in s and len(s[k]) for s in series.values())
    ]
    fig: Figure
    fig, axes = pyplot().subplots(
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
        ax.set_ylim(0, 1.02)  # x stays on the data: a CDF's shape is what it shows
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(title or "latency CDFs")
    return fig


def sweep_curves(
    points: Sequence[SweepPoint], load_name: str, path: Path, title: str = "sweep"
) -> Path:
    return save(sweep_figure(points, load_name, title), path)


def sweep_figure(points: Sequence[SweepPoint], load_name: str, title: str = "sweep") -> Figure:
    """Throughput vs latency (the serving trade-off) and goodput vs offered load."""
    fig: Figure
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(11, 4.4))
    ordered = sorted(points, key=lambda p: p.load)
    thr = [p.output_throughput for p in ordered]
    for attr, label in LATENCY_SERIES:
        ys = [getattr(p, attr) for p in ordered]
        if all(y is not None for y in ys):
            _series(left, thr, ys, ordered, label, attr)
    for p in ordered:
        y = p.p50_request_latency_ms if p.p50_request_latency_ms is not None else 0.0
        _label(left, p, (p.output_throughput, y))
    _axes(left, "output throughput (tok/s)", "latency (ms)")
    loads = [p.load for p in ordered]
    _series(right, loads, [p.request_throughput for p in ordered], ordered, "throughput (req/s)")
    if all(p.goodput is not None for p in ordered):
        _series(right, loads, [p.goodput for p in ordered], ordered, "goodput (req/s)", marker="s")
    for p in ordered:
        _label(right, p, (p.load, p.request_throughput))
    _axes(right, load_name, "requests / s")
    _notes(fig, ordered)
    fig.suptitle(title)
    return fig


def trials_figure(
    points: Sequence[SweepPoint], intervals: Mapping[str, Interval], title: str
) -> Figure:
    """Trials at one load: each trial's figure, the mean and its interval, axes from zero (a
    zoomed axis would make trial-to-trial noise look like a trend)."""
    fig: Figure
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(11, 4.4))
    numbers = list(range(1, len(points) + 1))
    for ax, attrs in (
        (left, (("output_throughput", "output throughput (tok/s)"),)),
        (right, LATENCY_SERIES),
    ):
        for attr, label in attrs:
            ys = [getattr(p, attr) for p in points]
            if any(y is None for y in ys):
                continue
            line = _series(ax, numbers, ys, points, label, attr, connect=False)
            _interval(ax, intervals.get(attr), len(points), line.get_color())
        ticks = [
            f"{n}" + (f"\n{INVALID_LABEL}" if p.valid is False else "")
            for n, p in zip(numbers, points, strict=True)
        ]
        ax.set_xticks(numbers, ticks)
        ax.set_xlim(0.5, len(points) + 0.5)
    _axes(left, "trial", "tokens / s", x_from_zero=False)
    _axes(right, "trial", "latency (ms)", x_from_zero=False)
    _notes(fig, points, "line and band: the trials' mean and its 95% confidence interval")
    fig.suptitle(title)
    return fig


def _series(
    ax: Axes,
    xs: Sequence[float],
    ys: Sequence[Any],
    points: Sequence[SweepPoint],
    label: str,
    key: str | None = None,
    *,
    marker: str = "o",
    connect: bool = True,
) -> Any:
    """One line; uncertified points starred and the line dashed; invalid points hollow."""
    shaky = key is not None and any(key in p.uncertified for p in points)
    name = f"{label} (* uncertified)" if shaky else label
    if connect:
        (line,) = ax.plot(xs, ys, linestyle="--" if shaky else "-", label=name, zorder=2)
    else:  # no line between trials: an empty one carries the legend's marker
        (line,) = ax.plot([], [], linestyle="none", marker=marker, label=name)
    color = line.get_color()
    for x, y, p in zip(xs, ys, points, strict=True):
        starred = key is not None and key in p.uncertified
        ax.plot(
            [x],
            [y],
            linestyle="none",
            marker=UNCERTIFIED_MARKER if starred else marker,
            markersize=11 if starred else 6,
            markeredgecolor=color,
            markerfacecolor="none" if p.valid is False else color,
            zorder=3,
        )
    return line


def _interval(ax: Axes, interval: Interval | None, count: int, color: str) -> None:
    if interval is None:
        return
    ax.axhline(interval.mean, color=color, linewidth=1, alpha=0.8)
    if interval.low is not None and interval.high is not None:
        ax.axhspan(interval.low, interval.high, color=color, alpha=0.15, gid="interval")


def _label(ax: Axes, point: SweepPoint, xy: tuple[float, float]) -> None:
    text = point.label + (f" {INVALID_LABEL}" if point.valid is False else "")
    ax.annotate(
        text, xy, xytext=(4, 4), textcoords="offset points", fontsize="x-small", gid="point-label"
    )


def _axes(ax: Axes, xlabel: str, ylabel: str, *, x_from_zero: bool = True) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.margins(x=0.12, y=0.15)
    if x_from_zero:
        ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", loc="best")


def _notes(fig: Figure, points: Sequence[SweepPoint], *extra: str) -> None:
    notes = list(extra)
    if any(p.valid is False for p in points):
        notes.append(f"hollow: validity failed ({INVALID_LABEL})")
    if any(p.uncertified for p in points):
        notes.append("* dashed: percentile not certified (too few requests)")
    if notes:
        fig.text(0.01, 0.01, "; ".join(notes), fontsize="x-small", color="dimgray")


def point_labels(fig: Figure) -> list[Annotation]:
    """The point labels of a figure (what ``separate_labels`` moves)."""
    return [t for ax in fig.axes for t in _labels(ax)]


def _labels(ax: Axes) -> list[Annotation]:
    from matplotlib.text import Annotation  # loaded with pyplot already

    return [t for t in ax.texts if isinstance(t, Annotation) and t.get_gid() == "point-label"]


def separate_labels(fig: Figure) -> None:
    """Move point labels so that none overlaps another or leaves its axes: flip a label to
    the left or below its point at an edge, then step it up or down past its neighbours."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        placed: list[Any] = []
        for label in sorted(_labels(ax), key=lambda t: t.xy):
            _fit(label, box, placed, renderer)
            placed.append(label.get_window_extent(renderer))


def _fit(label: Annotation, box: Any, placed: list[Any], renderer: Any) -> None:
    extent = label.get_window_extent(renderer)
    dx, dy = 4.0, 4.0
    if extent.x1 > box.x1:
        label.set_horizontalalignment("right")
        dx = -4.0
    if extent.y1 > box.y1:
        dy = -4.0 - extent.height * 72 / fig_dpi(label)
    label.xyann = (dx, dy)
    step = extent.height * 72 / fig_dpi(label) + 1
    for attempt in range(1, 40):
        extent = label.get_window_extent(renderer)
        if not any(extent.overlaps(other) for other in placed) and _inside(extent, box):
            return
        offset = step * ((attempt + 1) // 2) * (1 if attempt % 2 else -1)
        label.xyann = (dx, dy + offset)


def fig_dpi(label: Annotation) -> float:
    figure = label.get_figure()
    return float(figure.dpi) if figure is not None else 100.0


def _inside(extent: Any, box: Any) -> bool:
    return bool(
        extent.x0 >= box.x0 and extent.x1 <= box.x1 and extent.y0 >= box.y0 and extent.y1 <= box.y1
    )


def pyplot() -> Any:
    """matplotlib's pyplot, headless, imported on the first plot (0.3 s: not at start-up)."""
    import matplotlib

    matplotlib.use("Agg")  # never needs a display; must precede pyplot
    import matplotlib.pyplot as plt

    return plt


def save(fig: Figure, path: Path) -> Path:
    """Lay out, separate the point labels, write the PNG atomically, and close."""
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    separate_labels(fig)
    with atomic_writer(path) as handle:
        fig.savefig(handle, format="png", dpi=110)
    pyplot().close(fig)
    return path

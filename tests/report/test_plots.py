"""Plots are real PNGs with non-trivial content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from inferlab_bench.report.plots import (
    Interval,
    SweepPoint,
    latency_cdfs,
    separate_labels,
    sweep_curves,
    sweep_figure,
    trials_figure,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_nontrivial_png(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    import matplotlib.image

    pixels = matplotlib.image.imread(path)
    assert pixels.shape[0] > 200 and pixels.shape[1] > 300
    # Lines and text make many distinct colours; a blank canvas has one or two.
    distinct = np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)
    assert len(distinct) > 50


def test_latency_cdfs_png(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    series = {
        "c=1": {
            "ttft_ms": rng.gamma(2, 5, 64),
            "tpot_ms": rng.gamma(2, 1, 64),
            "request_latency_ms": rng.gamma(3, 50, 64),
        },
        "c=8": {
            "ttft_ms": rng.gamma(2, 9, 64),
            "tpot_ms": rng.gamma(2, 2, 64),
            "request_latency_ms": rng.gamma(3, 80, 64),
        },
    }
    assert_nontrivial_png(latency_cdfs(series, tmp_path / "cdf.png"))
    assert [p.name for p in tmp_path.iterdir()] == ["cdf.png"]


def test_sweep_curves_png(tmp_path: Path) -> None:
    points = [
        SweepPoint(f"c={c}", c, c * 0.9, c * 100.0, 10.0 + c, 20.0 + c, 100.0 + c, c * 0.8)
        for c in (1, 4, 16)
    ]
    assert_nontrivial_png(sweep_curves(points, "concurrency", tmp_path / "sweep.png"))


# --- Pictures that carry the verdicts: read from the matplotlib objects. ---


def _point(label: str, load: float, **kw: object) -> SweepPoint:
    fields: dict[str, object] = {
        "request_throughput": load * 0.9,
        "output_throughput": load * 100.0,
        "p50_ttft_ms": 10.0 + load,
        "p99_ttft_ms": 20.0 + load,
        "p50_request_latency_ms": 100.0 + load,
        "goodput": load * 0.8,
    }
    fields.update(kw)
    return SweepPoint(label, load, **fields)  # type: ignore[arg-type]


def _laid_out(fig: Any) -> Any:
    fig.tight_layout()
    separate_labels(fig)
    return fig


def _markers(ax: Any) -> list[Any]:
    """The single-point marker lines of an axes (one per point drawn)."""
    return [line for line in ax.lines if len(line.get_xdata()) == 1 and line.get_marker() != "None"]


def test_invalid_points_are_hollow_and_labelled() -> None:
    points = [_point("c=1", 1), _point("c=4", 4), _point("c=16", 16, valid=False)]
    fig = _laid_out(sweep_figure(points, "concurrency", "sweep: c=1, c=4, c=16"))
    for ax in fig.axes:
        hollow = [m for m in _markers(ax) if m.get_markerfacecolor() == "none"]
        filled = [m for m in _markers(ax) if m.get_markerfacecolor() != "none"]
        assert hollow and all(m.get_xdata()[0] in (16, 1600.0) for m in hollow)
        assert filled and all(m.get_xdata()[0] not in (16, 1600.0) for m in filled)
        labels = [t.get_text() for t in point_labels_of(ax)]
        assert "c=16 invalid" in labels and "c=1" in labels
    assert any("hollow: validity failed" in t.get_text() for t in fig.texts)
    assert fig._suptitle.get_text() == "sweep: c=1, c=4, c=16"
    plt.close(fig)


def test_uncertified_percentiles_are_starred_on_a_dashed_line() -> None:
    shaky = frozenset({"p99_ttft_ms"})
    points = [_point("c=1", 1, uncertified=shaky), _point("c=4", 4)]
    fig = sweep_figure(points, "concurrency")
    left = fig.axes[0]
    lines = {line.get_label(): line for line in left.lines if not line.get_label().startswith("_")}
    assert lines["TTFT p99 (* uncertified)"].get_linestyle() == "--"
    assert lines["TTFT p50"].get_linestyle() == "-"
    stars = [m for m in _markers(left) if m.get_marker() == "*"]
    assert [(m.get_xdata()[0], m.get_ydata()[0]) for m in stars] == [(100.0, 21.0)]
    plt.close(fig)


def test_labels_never_overlap_nor_leave_their_axes() -> None:
    """Two loads with almost the same figures (the "c=40c=40" case) and one at the far edge."""
    points = [
        _point("c=40", 40, output_throughput=4000.0, p50_request_latency_ms=500.0),
        _point("c=48", 48, output_throughput=4001.0, p50_request_latency_ms=500.5),
        _point("c=64 long label", 64, output_throughput=4002.0, p50_request_latency_ms=501.0),
        _point("c=1", 1),
    ]
    fig = _laid_out(sweep_figure(points, "concurrency"))
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        extents = [t.get_window_extent(renderer) for t in point_labels_of(ax)]
        assert len(extents) == 4
        for i, extent in enumerate(extents):
            assert box.x0 <= extent.x0 and extent.x1 <= box.x1, extent
            assert box.y0 <= extent.y0 and extent.y1 <= box.y1, extent
            assert not any(extent.overlaps(other) for other in extents[i + 1 :])
    plt.close(fig)


def test_axes_start_at_zero() -> None:
    points = [
        _point("c=40", 40, output_throughput=813.3),
        _point("c=41", 41, output_throughput=814.1),
    ]
    fig = sweep_figure(points, "concurrency")
    for ax in fig.axes:
        assert ax.get_xlim()[0] == 0 and ax.get_ylim()[0] == 0
    plt.close(fig)


def test_trials_show_their_interval_from_zero_not_a_zoomed_trend() -> None:
    points = [
        _point("c=40", 40, output_throughput=813.3),
        _point("c=40", 40, output_throughput=814.1, valid=False),
        _point("c=40", 40, output_throughput=813.8),
    ]
    interval = Interval(813.73, 812.7, 814.8)
    fig = trials_figure(points, {"output_throughput": interval}, "run --trials: 3 trials at c=40")
    left = fig.axes[0]
    assert left.get_ylim()[0] == 0 and left.get_ylim()[1] > 814.1
    bands = [p for p in left.patches if p.get_gid() == "interval"]
    assert len(bands) == 1
    band = bands[0]
    assert band.get_y() == 812.7 and band.get_y() + band.get_height() == 814.8
    assert [t.get_text() for t in left.get_xticklabels()] == ["1", "2\ninvalid", "3"]
    assert fig._suptitle.get_text() == "run --trials: 3 trials at c=40"
    plt.close(fig)


def test_a_png_carries_a_title_naming_the_command(tmp_path: Path) -> None:
    points = [_point("c=1", 1), _point("c=4", 4, valid=False)]
    assert_nontrivial_png(sweep_curves(points, "concurrency", tmp_path / "s.png", "sweep: x"))


def point_labels_of(ax: Any) -> list[Any]:
    return [t for t in ax.texts if t.get_gid() == "point-label"]

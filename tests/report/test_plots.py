"""Plots are real PNGs with non-trivial content."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from inferlab_bench.report.plots import SweepPoint, latency_cdfs, sweep_curves

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

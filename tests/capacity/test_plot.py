"""The capacity plot carries the verdicts: invalid probes hollow and labelled, uncertified
values starred, a title naming the command, labels inside their axes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from inferlab_bench.capacity.plot import capacity_figure
from inferlab_bench.capacity.spec import Axis, Criterion, SearchSpec
from inferlab_bench.report.plots import separate_labels
from tests.capacity.test_search import cliff, search


def test_invalid_probes_are_hollow_labelled_and_the_title_says_capacity(tmp_path: Path) -> None:
    server = cliff(11)
    server.invalid = {8.0: 1}  # c=8 fails validity once, then counts
    outcome: Any = search(tmp_path, server)
    spec = SearchSpec(
        axis=Axis.CONCURRENCY, low=1, high=64, criterion=Criterion(kind="attainment", value=0.95)
    )
    fig = capacity_figure(spec, outcome.answer, outcome.probes)
    fig.tight_layout()
    separate_labels(fig)
    assert fig._suptitle.get_text().startswith("capacity: ")
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        points = [line for line in ax.lines if len(line.get_xdata()) == 1]
        hollow = [p for p in points if p.get_markerfacecolor() == "none"]
        assert [p.get_xdata()[0] for p in hollow] == [8.0]
        labels = [t for t in ax.texts if t.get_gid() == "point-label"]
        assert [t.get_text() for t in labels] == ["c=8 invalid"]
        box, extent = ax.get_window_extent(renderer), labels[0].get_window_extent(renderer)
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1
        assert box.y0 <= extent.y0 and extent.y1 <= box.y1
    ttft = fig.axes[0]
    # The scripted probes' TTFT shares are never certified (support.figures): all starred.
    assert {p.get_marker() for p in ttft.lines if len(p.get_xdata()) == 1} == {"*"}
    assert any("hollow: probe invalid" in t.get_text() for t in fig.texts)
    plt.close(fig)

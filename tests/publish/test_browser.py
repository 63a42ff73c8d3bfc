"""The headless-browser harness itself: it must see a broken page's console errors and tell a
page with a plot from one without, or its passing checks on our pages would mean nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferlab_bench.report.plots import latency_cdfs
from tests.publish import browser

pytestmark = pytest.mark.skipif(browser.chromium() is None, reason="chromium is not installed")


def test_console_errors_and_plot_pixels_are_seen(tmp_path: Path) -> None:
    import base64

    import numpy as np

    png = latency_cdfs({"a": {"ttft_ms": np.linspace(1.0, 9.0, 50)}}, tmp_path / "p.png")
    data = base64.b64encode(png.read_bytes()).decode()
    page = tmp_path / "page.html"
    page.write_text(
        f"<html><body><img src='data:image/png;base64,{data}'>"
        "<script>console.error('boom'); notDefined();</script></body></html>"
    )
    rendered = browser.render(page, tmp_path, height=800)
    assert any("boom" in line for line in rendered.console)
    assert any("notDefined" in line for line in rendered.console)
    with_plot = browser.plot_pixels(rendered.screenshot)
    page.write_text("<html><body><p>no plot here</p></body></html>")
    blank = browser.render(page, tmp_path, height=800)
    assert blank.console == []
    assert with_plot > 500 and browser.plot_pixels(blank.screenshot) == 0

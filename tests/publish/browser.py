"""A real headless Chromium (Debian's ``chromium`` package) opening a local page: its DOM after
scripts ran, its console messages, and a screenshot. Tests skip when it is not installed."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
# matplotlib's first two line colours (tab:blue, tab:orange): plots draw them, text never does.
PLOT_COLOURS = ((31, 119, 180), (255, 127, 14))


@dataclass(frozen=True)
class Rendered:
    dom: str
    console: list[str]
    screenshot: Path


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render(page: Path, shots: Path, height: int = 6000) -> Rendered:
    """Open ``page`` twice in fresh profiles: once for the DOM and console, once for pixels."""
    binary = chromium()
    assert binary is not None
    url = page.resolve().as_uri()
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [
                binary,
                *FLAGS,
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                "--virtual-time-budget=5000",
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    shot = shots / "page.png"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                binary,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size=1280,{height}",
                f"--screenshot={shot}",
                url,
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
    return Rendered(dom.stdout, console, shot)


def plot_pixels(screenshot: Path) -> int:
    """How many pixels of the screenshot have a plot line colour (within a small tolerance)."""
    pixels = np.asarray(Image.open(screenshot).convert("RGB"), dtype=np.int16)
    found = 0
    for colour in PLOT_COLOURS:
        close = np.abs(pixels - np.asarray(colour, dtype=np.int16)).max(axis=2) <= 12
        found += int(close.sum())
    return found

"""The page escapes by construction: markup planted in every field an input can reach (a
bundle's index, requests, validity, trials listing, folder names, reproduction.json, a peer's
baseline names) reaches the page as text, never as an element or an attribute.

The page is parsed back with the standard library's HTML parser: the only elements are the
template's own, the only script is ours, and each planted marker is there, escaped.
"""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from inferlab_bench.publish.archive import read_bundle, unpack
from inferlab_bench.publish.html import build_page
from tests.publish.support import published_bundle

OUR_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "table", "thead",
    "tbody", "tr", "th", "td", "ul", "li", "span", "b", "code", "img", "script",
}  # fmt: skip


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes |= {name for name, _ in attrs}


def _marker(key: str) -> str:
    return f"<pwn-{key} onerror=alert(1)>\"'&"


class Planted:
    """Markers planted so far, by field."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def __call__(self, key: str, shown: bool = True) -> str:
        """``shown`` False: a number's field, where text is printed as '-' and never shown."""
        if shown:
            self.keys.append(key)
        return _marker(key)


def _edit(path: Path, change: Any) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def _plant_run(run: Path, plant: Planted) -> None:
    """Markup in a saved sweep: request strings, a legacy validity document, a trials listing
    (its first case made a ``--trials`` folder), a folder name."""
    for case in ("01-c1", "02-c2"):
        _edit(
            run / case / "request.json",
            lambda d: d["model"].update(served_name=plant("served-name"), locator=plant("locator")),
        )
    trial = run / "01-c1" / "trial-01"
    trial.mkdir()
    for item in list((run / "01-c1").iterdir()):
        if item != trial:
            shutil.move(item, trial / item.name)
    summary = {
        "metric": plant("summary-metric"),
        "trials": 1,
        "mean": 1.0,
        "stddev": None,
        "ci_low": 0.5,
        "ci_high": 1.5,
        "ci_half_width": 0.5,
        "confidence": 0.95,
        "verdict": "unknown",
    }
    listing = {"trials": ["trial-01"], "succeeded": ["trial-01"], "summaries": [summary]}
    (run / "01-c1" / "trials.json").write_text(json.dumps(listing))
    # A validity document of no known schema is read as it is: every value planted.
    (trial / "validity.json").write_text(
        json.dumps(
            {
                "verdicts": {plant("verdict-name"): plant("verdict-value"), "x": "fail"},
                "certification": [
                    {
                        "metric": "ttft_ms",  # matched, not shown: stars the p99 cell
                        "claims": [{"percentile": 99, "certified": False}],
                    }
                ],
            }
        )
    )
    shutil.move(run / "02-c2", run / f"02-c2{plant('folder')}")


def _assert_escaped(page: str, planted: Planted) -> None:
    elements = _Elements()
    elements.feed(page)
    assert set(elements.tags) <= OUR_TAGS, set(elements.tags) - OUR_TAGS
    assert elements.tags.count("script") == 1  # ours, the plot counter
    assert "onerror" not in elements.attributes
    for key in set(planted.keys):
        assert f"&lt;pwn-{key} onerror=alert(1)&gt;&#34;&#39;&amp;" in page, key
    assert "*</td>" in page  # the uncertified p99 TTFT is starred


@pytest.fixture(scope="module")
def real_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return published_bundle(tmp_path_factory.getbasetemp())


def test_a_run_page_escapes_every_planted_field(real_bundle: Path, tmp_path: Path) -> None:
    run = tmp_path / "sweep"
    shutil.copytree(real_bundle.parent / "sweep", run)
    plant = Planted()
    _plant_run(run, plant)
    _assert_escaped(build_page(run), plant)


def test_a_reproduction_page_escapes_every_planted_field(real_bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "repro"
    published = unpack(read_bundle(real_bundle), out / "published")
    plant = Planted()
    _plant_run(published / "run", plant)
    folder = next(p.name for p in (published / "run").iterdir() if p.name.startswith("02-c2"))
    _edit(
        published / "BUNDLE.json",
        lambda d: d.update(
            versions={plant("version-name"): plant("version-value")},
            machine={plant("machine-name"): plant("machine-value")},
            population={**d["population"], "preparation": {"tokenizer_fingerprint": plant("fp")}},
        ),
    )
    reproduced = out / "reproduced" / "run"
    shutil.copytree(published / "run" / "01-c1", reproduced / "01-c1")

    def case(directory: str) -> dict[str, Any]:
        metric = {
            "metric": plant("metric"),
            "published": 1.0,
            "reproduced": plant("reproduced-value", shown=False),
            "difference": 0.5,
            "relative": 0.1,
            "ci_low": -1,
            "ci_high": plant("ci-high", shown=False),
            "verdict": plant("verdict"),
            "reason": plant("reason"),
            "test": plant("test"),
        }
        return {
            "label": plant("label"),
            "directory": directory,
            "not_comparable": [plant("not-comparable")],
            "caveats": [plant("caveat")],
            "limits": [plant("limit")],
            # "test" is shown where there is no reason
            "metrics": [metric, {**metric, "verdict": "faster", "reason": None}],
        }

    document = {
        "bundle_source": plant("bundle-source"),
        "server": {"url": plant("url"), "model": plant("model")},
        "trials": plant("trials"),
        "wall_seconds": plant("wall-seconds"),
        "confidence": plant("confidence"),
        "tolerance": 0.05,
        "cases": [case("run/01-c1")],
        "baseline": {
            "source": {"tool": plant("tool"), "version": plant("tool-version"), "path": "x.json"},
            "cases": [case(f"run/{folder}")],
        },
    }
    (out / "reproduction.json").write_text(json.dumps(document))
    _assert_escaped(build_page(out), plant)

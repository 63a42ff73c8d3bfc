"""One self-contained HTML page of a run, sweep, unpacked bundle or reproduction.

Everything is inline: CSS, the plots as base64 PNG, and a few lines of script that only count
the plots the browser decoded (``data-plots-rendered`` on ``<body>``), so a headless browser
can tell that they render. Nothing is fetched from anywhere.
"""

from __future__ import annotations

import base64
import html
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from inferlab_bench.errors import BundleError, RequestError
from inferlab_bench.protocol import BenchRequestSloInput
from inferlab_bench.publish.contents import INDEX_FILE, RUN_PREFIX, case_groups
from inferlab_bench.publish.reproduce import PUBLISHED_DIR, REPRODUCED_DIR, REPRODUCTION_FILE
from inferlab_bench.report import plots
from inferlab_bench.report.figures import case_plots, latency_samples
from inferlab_bench.report.rundir import SavedCase, load_case
from inferlab_bench.report.tables import load_label
from inferlab_bench.validity.report import VALIDITY_SCHEMA, ValidityDocument, failed_check_text
from inferlab_bench.versions import handshake_facts

HEADLINE = (
    ("request_throughput", "req/s"),
    ("output_throughput", "out tok/s"),
    ("p50_ttft_ms", "TTFT p50"),
    ("p99_ttft_ms", "TTFT p99"),
    ("p50_tpot_ms", "TPOT p50"),
    ("p99_tpot_ms", "TPOT p99"),
    ("p50_request_latency_ms", "E2E p50"),
    ("p99_request_latency_ms", "E2E p99"),
    ("goodput", "goodput"),
)
PLAIN = {
    "requests_succeeded": "every request succeeded",
    "load_generator_kept_up": "the load generator kept up with the planned load",
    "prompt_tokens_reconciled": "the server counted the prompt tokens the population holds",
    "output_lengths_honored": "the server produced the requested output lengths",
    "cache_cold": "the prefix cache was cold when profiling started",
}
STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:0.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}
.same{color:#333}.faster{color:#080;font-weight:bold}.slower{color:#b00;font-weight:bold}
.nc{color:#a60}.fail{color:#b00}.pass{color:#080}
img{max-width:100%;border:1px solid #eee}
code{font-size:90%}
"""
SCRIPT = """
window.addEventListener('load', function () {
  var shown = 0;
  document.querySelectorAll('img.plot').forEach(function (img) {
    if (img.complete && img.naturalWidth > 0) { shown += 1; }
  });
  document.body.setAttribute('data-plots-rendered', String(shown));
});
"""
VERDICT_CLASS = {
    "same within noise": "same",
    "faster": "faster",
    "slower": "slower",
    "not comparable": "nc",
}


def build_page(directory: Path) -> str:
    """The page of whatever ``directory`` holds (a reproduction, bundle, sweep or run)."""
    if (directory / REPRODUCTION_FILE).is_file():
        return _reproduction_page(directory)
    root = directory / RUN_PREFIX if (directory / INDEX_FILE).is_file() else directory
    cases = _cases(root)
    index = _json(directory / INDEX_FILE) if (directory / INDEX_FILE).is_file() else None
    body = [f"<h1>inferlab-bench: {_e(directory.resolve().name)}</h1>"]
    body += _setup(cases, index)
    body += _results(cases)
    body += _figures(cases)
    return _page(directory.resolve().name, body)


def _reproduction_page(directory: Path) -> str:
    doc = _json(directory / REPRODUCTION_FILE)
    published_root = directory / PUBLISHED_DIR
    index = _json(published_root / INDEX_FILE) if (published_root / INDEX_FILE).is_file() else None
    body = [f"<h1>Reproduction of {_e(str(doc.get('bundle_source')))}</h1>"]
    body.append(
        f"<p>Server {_e(doc['server']['url'])}, model <code>{_e(doc['server']['model'])}</code>, "
        f"{doc['trials']} trial(s) per case, {doc['wall_seconds']:.0f} s of wall time; a "
        f"difference is called faster or slower when its {doc['confidence']:.0%} interval "
        f"excludes zero and it is at least {doc['tolerance']:.0%} of the published value.</p>"
    )
    published = _cases(published_root / RUN_PREFIX)
    body += _setup(published, index, title="Published setup")
    for case in doc["cases"]:
        body += _verdict_section(case)
        reproduced = _cases(directory / REPRODUCED_DIR / case["directory"])
        original = [
            c for c in published if c.directory.is_relative_to(published_root / case["directory"])
        ]
        body += _side_by_side_plot(case["label"], original, reproduced)
    baseline = doc.get("baseline")
    if baseline:
        source = baseline["source"]
        body.append(
            f"<h2>Against {_e(source['tool'])} {_e(str(source.get('version') or ''))}"
            f" ({_e(Path(source['path']).name)})</h2>"
        )
        for case in baseline["cases"]:
            body += _verdict_section(case)
    body += _results(published, title="Published results")
    body += _figures(published)
    return _page(f"reproduction of {doc.get('bundle_source')}", body)


def _verdict_section(case: dict[str, Any]) -> list[str]:
    out = [f"<h2>{_e(case['label'])}: verdicts</h2>"]
    out += [f"<p class='nc'>Not comparable: {_e(r)}</p>" for r in case["not_comparable"]]
    out += [f"<p>Caveat: {_e(c)}</p>" for c in case["caveats"]]
    out += [f"<p>Limit: {_e(lim)}</p>" for lim in case["limits"]]
    rows = []
    for m in case["metrics"]:
        cls = VERDICT_CLASS.get(m["verdict"], "")
        rows.append(
            [
                m["metric"],
                _num(m["published"]),
                _num(m["reproduced"]),
                _signed(m["difference"], m["relative"]),
                _interval(m["ci_low"], m["ci_high"]),
                f"<span class='{cls}'>{_e(m['verdict'])}</span>",
                _e(m["reason"] or m["test"]),
            ]
        )
    header = ["metric", "published", "reproduced", "difference", "95% CI", "verdict", "test / why"]
    out.append(_table(header, rows, escape=False))
    return out


def _setup(
    cases: Sequence[SavedCase], index: dict[str, Any] | None, title: str = "Setup"
) -> list[str]:
    first = next((c.request for c in cases if c.request is not None), None)
    facts: list[tuple[str, str]] = []
    if first is not None:
        e = first.endpoint
        facts += [
            ("server", f"http://{e.host}:{e.port}{e.chat_completions_path}"),
            ("model", first.model.served_name),
            ("tokenizer", first.model.locator),
            (
                "requests per case",
                f"{first.case.request_count} (warmup {first.case.warmup_request_count})",
            ),
            ("loads", ", ".join(load_label(c.request) for c in cases)),
            ("seed", str(first.definition.seed)),
            ("prefix-cache reset", "yes" if first.definition.reset_prefix_cache else "no"),
            ("SLO", _slo_text(first.definition.request_slo)),
        ]
        if first.population is not None:
            facts.append(
                (
                    "population sha256",
                    f"{first.population.sha256} ({first.population.entries} entries)",
                )
            )
    population = (index or {}).get("population") or {}
    prep = population.get("preparation") or {}
    if prep.get("tokenizer_fingerprint"):
        facts.append(("tokenizer fingerprint", prep["tokenizer_fingerprint"]))
    versions = (index or {}).get("versions") or handshake_facts()
    facts.append(("versions", ", ".join(f"{k} {v}" for k, v in versions.items() if v is not None)))
    if index and index.get("machine"):
        facts.append(("machine", ", ".join(f"{k} {v}" for k, v in index["machine"].items())))
    return [f"<h2>{_e(title)}</h2>", _table(["", ""], [[k, v] for k, v in facts])]


def _slo_text(slo: BenchRequestSloInput | None) -> str:
    if slo is None:
        return "none"
    bounds = {k: v for k, v in slo.model_dump().items() if v is not None}
    return ", ".join(f"{k} {v}" for k, v in bounds.items())


def _results(cases: Sequence[SavedCase], title: str = "Results") -> list[str]:
    header = ["case", "load", "status", *(label for _, label in HEADLINE)]
    rows = [
        [
            _case_name(c),
            load_label(c.request),
            c.result.status.value,
            *(_num(c.result.metrics.get(name)) for name, _ in HEADLINE),
        ]
        for c in cases
    ]
    out = [f"<h2>{_e(title)}</h2>", _table(header, rows)]
    out.append("<h3>Validity</h3><ul>")
    for case in cases:
        out.append(f"<li><b>{_e(_case_name(case))}</b>: {_validity_words(case)}</li>")
    out.append("</ul>")
    return out


def _validity_words(case: SavedCase) -> str:
    doc = case.validity or {}
    verdicts: dict[str, str] = doc.get("verdicts") or {}
    if not verdicts:
        return "no validity evidence saved"
    parts = []
    for name, value in verdicts.items():
        words = PLAIN.get(name, name.replace("_", " "))
        mark = {"pass": "yes", "fail": "NO", "unknown": "unknown"}.get(value, value)
        parts.append(f"<span class='{_e(value)}'>{_e(words)}: {_e(mark)}</span>")
    failed = _failed_checks(doc)
    if failed:
        parts.append("failed checks: " + _e("; ".join(failed)))
    return "; ".join(parts)


def _failed_checks(doc: dict[str, Any]) -> list[str]:
    if doc.get("schema_name") != VALIDITY_SCHEMA:
        return []
    try:
        parsed = ValidityDocument.model_validate(doc)
    except ValidationError:
        return []
    return [failed_check_text(c) for c in parsed.failed_checks()]


def _figures(cases: Sequence[SavedCase]) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="inferlab-html-") as tmp:
        made = case_plots(list(cases), Path(tmp))
        return ["<h2>Figures</h2>", *(_img(p, p.stem) for p in made)]


def _side_by_side_plot(
    label: str, published: Sequence[SavedCase], reproduced: Sequence[SavedCase]
) -> list[str]:
    series = {
        f"published {c.directory.name}": latency_samples(c) for c in published if latency_samples(c)
    }
    series.update({f"reproduced {c.directory.name}": latency_samples(c) for c in reproduced})
    series = {k: v for k, v in series.items() if v}
    if not series:
        return []
    with tempfile.TemporaryDirectory(prefix="inferlab-html-") as tmp:
        path = plots.latency_cdfs(series, Path(tmp) / "cdf.png", title=f"{label}: latency CDFs")
        return [_img(path, f"{label} latency CDFs, published and reproduced")]


def _cases(root: Path) -> list[SavedCase]:
    try:
        groups = case_groups(root)
    except BundleError as exc:
        raise RequestError(
            exc.message, hint="point at a run, sweep, bundle or reproduction"
        ) from exc
    return [load_case(t) for g in groups for t in g.trials]


def _case_name(case: SavedCase) -> str:
    parent = case.directory.parent.name
    return f"{parent}/{case.label}" if case.label.startswith("trial-") else case.label


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f"<p><img class='plot' alt='{_e(alt)}' src='data:image/png;base64,{data}'></p>"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], escape: bool = True) -> str:
    cell = _e if escape else (lambda s: s)
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(str(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _page(title: str, body: Sequence[str]) -> str:
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>"
        + "\n".join(body)
        + f"<script>{SCRIPT}</script></body></html>\n"
    )


def _json(path: Path) -> dict[str, Any]:
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise RequestError(f"{path}: cannot read as JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise RequestError(f"{path}: expected a JSON object")
    return value


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _signed(diff: float | None, rel: float | None) -> str:
    if diff is None:
        return "-"
    return f"{diff:+.3g}" + ("" if rel is None else f" ({rel * 100:+.1f}%)")


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"{low:+.3g} to {high:+.3g}"


def _e(text: str) -> str:
    return html.escape(text, quote=True)

"""One self-contained HTML page of a run, sweep, unpacked bundle or reproduction.

Everything is inline: CSS, the plots as base64 PNG, and a few lines of script that only count
the plots the browser decoded (``data-plots-rendered`` on ``<body>``), so a headless browser
can tell that they render. Nothing is fetched from anywhere. Markup is written only by the
template in ``page`` (Jinja2, autoescape on): this module hands it plain text.
"""

from __future__ import annotations

import base64
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from inferlab_bench.errors import BundleError, RequestError
from inferlab_bench.protocol import BenchRequestSloInput
from inferlab_bench.publish.contents import INDEX_FILE, RUN_PREFIX, CaseGroup, case_groups
from inferlab_bench.publish.page import (
    Block,
    Cell,
    Part,
    bullets,
    heading,
    image,
    paragraph,
    render,
    table,
)
from inferlab_bench.publish.reproduce import PUBLISHED_DIR, REPRODUCED_DIR, REPRODUCTION_FILE
from inferlab_bench.report import plots
from inferlab_bench.report.figures import case_plots, latency_samples
from inferlab_bench.report.rundir import SavedCase, load_case, trial_summaries
from inferlab_bench.report.tables import UNCERTIFIED_NOTE, load_label
from inferlab_bench.validity.report import VALIDITY_SCHEMA, ValidityDocument, failed_check_text
from inferlab_bench.validity.trials import MetricSummary
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
VERDICT_CLASS = {
    "same within noise": "same",
    "faster": "faster",
    "slower": "slower",
    "not comparable": "nc",
}
VALIDITY_CLASS = {"pass": "pass", "fail": "fail", "unknown": "unknown"}


@dataclass(frozen=True)
class _Group:
    """A case of the page: its folder, its trials and the trials' saved mean and interval."""

    directory: Path
    trials: tuple[SavedCase, ...]
    summaries: tuple[MetricSummary, ...]


def build_page(directory: Path) -> str:
    """The page of whatever ``directory`` holds (a reproduction, bundle, sweep or run)."""
    if (directory / REPRODUCTION_FILE).is_file():
        return _reproduction_page(directory)
    root = directory / RUN_PREFIX if (directory / INDEX_FILE).is_file() else directory
    groups = _groups(root)
    cases = [c for g in groups for c in g.trials]
    index = _json(directory / INDEX_FILE) if (directory / INDEX_FILE).is_file() else None
    name = directory.resolve().name
    blocks = [heading(f"inferlab-bench: {name}", 1)]
    blocks += _setup(cases, index)
    blocks += _results(groups)
    blocks += _figures(cases)
    return render(name, blocks)


def _reproduction_page(directory: Path) -> str:
    doc = _json(directory / REPRODUCTION_FILE)
    published_root = directory / PUBLISHED_DIR
    index = _json(published_root / INDEX_FILE) if (published_root / INDEX_FILE).is_file() else None
    server = _mapping(doc.get("server"))
    blocks = [heading(f"Reproduction of {_text(doc.get('bundle_source'))}", 1)]
    blocks.append(
        paragraph(
            f"Server {_text(server.get('url'))}, model ",
            Part(_text(server.get("model")), code=True),
            f", {_text(doc.get('trials'))} trial(s) per case, "
            f"{_fmt(doc.get('wall_seconds'), '.0f')} s of wall time; a difference is called "
            f"faster or slower when its {_fmt(doc.get('confidence'), '.0%')} interval excludes "
            f"zero and it is at least {_fmt(doc.get('tolerance'), '.0%')} of the published value.",
        )
    )
    published = _groups(published_root / RUN_PREFIX)
    published_cases = [c for g in published for c in g.trials]
    blocks += _setup(published_cases, index, title="Published setup")
    for case in _list(doc.get("cases")):
        case = _mapping(case)
        blocks += _verdict_section(case)
        folder = _inside(directory / REPRODUCED_DIR, case.get("directory"))
        original_root = _inside(published_root, case.get("directory"))
        reproduced = [c for g in _groups(folder) for c in g.trials]
        original = [c for c in published_cases if c.directory.is_relative_to(original_root)]
        blocks += _side_by_side_plot(_text(case.get("label")), original, reproduced)
    baseline = _mapping(doc.get("baseline"))
    if baseline:
        source = _mapping(baseline.get("source"))
        blocks.append(
            heading(
                f"Against {_text(source.get('tool'))} {_text(source.get('version') or '')} "
                f"({Path(_text(source.get('path'))).name})"
            )
        )
        for case in _list(baseline.get("cases")):
            blocks += _verdict_section(_mapping(case))
    blocks += _results(published, title="Published results")
    blocks += _figures(published_cases)
    return render(f"reproduction of {_text(doc.get('bundle_source'))}", blocks)


def _verdict_section(case: Mapping[str, Any]) -> list[Block]:
    out = [heading(f"{_text(case.get('label'))}: verdicts")]
    out += [
        paragraph(f"Not comparable: {_text(r)}", cls="nc")
        for r in _list(case.get("not_comparable"))
    ]
    out += [paragraph(f"Caveat: {_text(c)}") for c in _list(case.get("caveats"))]
    out += [paragraph(f"Limit: {_text(lim)}") for lim in _list(case.get("limits"))]
    rows: list[list[Cell]] = []
    for m in map(_mapping, _list(case.get("metrics"))):
        verdict = _text(m.get("verdict"))
        rows.append(
            [
                _text(m.get("metric")),
                _num(m.get("published")),
                _num(m.get("reproduced")),
                _signed(m.get("difference"), m.get("relative")),
                _interval(m.get("ci_low"), m.get("ci_high")),
                Part(verdict, cls=VERDICT_CLASS.get(verdict, "")),
                _text(m.get("reason") or m.get("test")),
            ]
        )
    header = ["metric", "published", "reproduced", "difference", "95% CI", "verdict", "test / why"]
    out.append(table(header, rows))
    return out


def _setup(
    cases: Sequence[SavedCase], index: Mapping[str, Any] | None, title: str = "Setup"
) -> list[Block]:
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
            population = first.population
            facts.append(
                ("population sha256", f"{population.sha256} ({population.entries} entries)")
            )
    index = index or {}
    prep = _mapping(_mapping(index.get("population")).get("preparation"))
    if prep.get("tokenizer_fingerprint"):
        facts.append(("tokenizer fingerprint", _text(prep["tokenizer_fingerprint"])))
    versions = _mapping(index.get("versions")) or handshake_facts()
    facts.append(
        ("versions", ", ".join(f"{k} {_text(v)}" for k, v in versions.items() if v is not None))
    )
    if machine := _mapping(index.get("machine")):
        facts.append(("machine", ", ".join(f"{k} {_text(v)}" for k, v in machine.items())))
    return [heading(title), table((), [[k, v] for k, v in facts])]


def _slo_text(slo: BenchRequestSloInput | None) -> str:
    if slo is None:
        return "none"
    bounds = {k: v for k, v in slo.model_dump().items() if v is not None}
    return ", ".join(f"{k} {v}" for k, v in bounds.items())


def _results(groups: Sequence[_Group], title: str = "Results") -> list[Block]:
    header = ["case", "load", "status", *(label for _, label in HEADLINE)]
    rows: list[list[Cell]] = []
    starred = False
    for case in (c for g in groups for c in g.trials):
        marks = _uncertified(case.validity)
        cells: list[Cell] = [_case_name(case), load_label(case.request), case.result.status.value]
        for name, _ in HEADLINE:
            text = _num(case.result.metrics.get(name))
            star = text != "-" and _is_marked(name, marks)
            starred |= star
            cells.append(text + ("*" if star else ""))
        rows.append(cells)
    out = [heading(title), table(header, rows)]
    if starred:
        out.append(paragraph(UNCERTIFIED_NOTE, cls="note"))
    out += _trial_summaries(groups)
    out.append(heading("Validity", 3))
    cases = [c for g in groups for c in g.trials]
    out.append(
        bullets([[Part(_case_name(c), bold=True), ": ", *_validity_parts(c)] for c in cases])
    )
    return out


def _trial_summaries(groups: Sequence[_Group]) -> list[Block]:
    """Per case of repeated trials: each metric's mean over the trials and its interval."""
    out: list[Block] = []
    for group in groups:
        if not group.summaries:
            continue
        rows: list[list[Cell]] = []
        for s in group.summaries:
            interval = (
                "-"
                if s.ci_low is None or s.ci_high is None
                else f"{_num(s.ci_low)} to {_num(s.ci_high)}"
            )
            rows.append([s.metric, str(s.trials), _num(s.mean), interval, s.verdict])
        name = group.directory.name
        out.append(heading(f"{name}: mean over trials and its interval", 3))
        confidence = _fmt(group.summaries[0].confidence, ".0%")
        out.append(table(["metric", "trials", "mean", f"{confidence} interval", "verdict"], rows))
    return out


def _uncertified(validity: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """(metric, ``p99``) pairs whose sample size does not certify them."""
    marks: set[tuple[str, str]] = set()
    for metric in map(_mapping, _list((validity or {}).get("certification"))):
        for claim in map(_mapping, _list(metric.get("claims"))):
            percentile = claim.get("percentile")
            if claim.get("certified") is False and isinstance(percentile, int | float):
                marks.add((_text(metric.get("metric")), f"p{percentile:g}"))
    return marks


def _is_marked(name: str, marks: set[tuple[str, str]]) -> bool:
    stat, _, metric = name.partition("_")
    return (metric, stat) in marks


def _validity_parts(case: SavedCase) -> list[Cell]:
    doc = case.validity or {}
    verdicts = _mapping(doc.get("verdicts"))
    if not verdicts:
        return ["no validity evidence saved"]
    parts: list[Cell] = []
    for name, value in verdicts.items():
        words = PLAIN.get(name, str(name).replace("_", " "))
        value = _text(value)
        mark = {"pass": "yes", "fail": "NO", "unknown": "unknown"}.get(value, value)
        if parts:
            parts.append("; ")
        parts.append(Part(f"{words}: {mark}", cls=VALIDITY_CLASS.get(value, "")))
    failed = _failed_checks(doc)
    if failed:
        parts.append("; failed checks: " + "; ".join(failed))
    # The sentence of each failed verdict, as report and sweep print it (with the measured
    # distortion where the simulator's truth decided it).
    explanations = _mapping(doc.get("explanations"))
    for name, value in verdicts.items():
        sentence = explanations.get(name)
        if _text(value) == "fail" and isinstance(sentence, str):
            parts.append(f" {sentence}")
    return parts


def _failed_checks(doc: Mapping[str, Any]) -> list[str]:
    if doc.get("schema_name") != VALIDITY_SCHEMA:
        return []
    try:
        parsed = ValidityDocument.model_validate(doc)
    except ValidationError:
        return []
    return [failed_check_text(c) for c in parsed.failed_checks()]


def _figures(cases: Sequence[SavedCase]) -> list[Block]:
    with tempfile.TemporaryDirectory(prefix="inferlab-html-") as tmp:
        made = case_plots(list(cases), Path(tmp))
        return [heading("Figures"), *(_img(p, p.stem) for p in made)]


def _side_by_side_plot(
    label: str, published: Sequence[SavedCase], reproduced: Sequence[SavedCase]
) -> list[Block]:
    series = {f"published {c.directory.name}": latency_samples(c) for c in published}
    series.update({f"reproduced {c.directory.name}": latency_samples(c) for c in reproduced})
    series = {k: v for k, v in series.items() if v}
    if not series:
        return []
    with tempfile.TemporaryDirectory(prefix="inferlab-html-") as tmp:
        path = plots.latency_cdfs(series, Path(tmp) / "cdf.png", title=f"{label}: latency CDFs")
        return [_img(path, f"{label} latency CDFs, published and reproduced")]


def _groups(root: Path) -> list[_Group]:
    try:
        groups = case_groups(root)
    except BundleError as exc:
        raise RequestError(
            exc.message, hint="point at a run, sweep, bundle or reproduction"
        ) from exc
    return [_group(root, g) for g in groups]


def _group(root: Path, group: CaseGroup) -> _Group:
    trials = tuple(load_case(t, inside=root) for t in group.trials)
    return _Group(group.directory, trials, trial_summaries(group.directory))


def _inside(root: Path, name: object) -> Path:
    """``root / name`` for a name read from a file, refused when it leaves ``root``."""
    text = _text(name)
    candidate = root / text
    if (
        not text
        or Path(text).is_absolute()
        or not candidate.resolve().is_relative_to(root.resolve())
    ):
        raise RequestError(
            f"{root.parent / REPRODUCTION_FILE}: case directory {text!r} is not inside {root}",
            hint="the reproduction folder was edited; re-run `inferlab-bench reproduce`",
        )
    return candidate


def _case_name(case: SavedCase) -> str:
    parent = case.directory.parent.name
    return f"{parent}/{case.label}" if case.label.startswith("trial-") else case.label


def _img(path: Path, alt: str) -> Block:
    return image(alt, base64.b64encode(path.read_bytes()).decode())


def _json(path: Path) -> dict[str, Any]:
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise RequestError(f"{path}: cannot read as JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise RequestError(f"{path}: expected a JSON object")
    return value


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _fmt(value: object, spec: str) -> str:
    number = _finite(value)
    return _text(value) if number is None else format(number, spec)


def _num(value: object) -> str:
    number = _finite(value)
    return "-" if number is None else f"{number:.4g}"


def _signed(diff: object, rel: object) -> str:
    d, r = _finite(diff), _finite(rel)
    if d is None:
        return "-"
    return f"{d:+.3g}" + ("" if r is None else f" ({r * 100:+.1f}%)")


def _interval(low: object, high: object) -> str:
    lo, hi = _finite(low), _finite(high)
    return "-" if lo is None or hi is None else f"{lo:+.3g} to {hi:+.3g}"

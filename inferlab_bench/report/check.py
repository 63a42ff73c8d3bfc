"""``report --check``: a saved folder's numbers, verdicts and marks agree with each other.

Every kind of folder we write is covered by what it holds: each ``result.json`` below it (a run,
the trials of ``run --trials``, a sweep, the demo, a capacity search's probes, a reproduction),
each ``trials.json`` and each ``capacity.json``. The checks read saved files and the tables the
terminal would print; they never run anything.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console, Group, RenderableType
from rich.table import Table

from inferlab_bench.errors import InferlabError
from inferlab_bench.layout import AIPERF_DIR, RESULT_FILE, TRIALS_FILE, VALIDITY_FILE
from inferlab_bench.protocol import ClientStatus
from inferlab_bench.report.rundir import SavedCase, load_case
from inferlab_bench.report.tables import (
    LATENCIES,
    STATS,
    case_table,
    sweep_table,
    two_durations_note,
    uncertified,
)

CAPACITY_FILE = "capacity.json"
PHASE_MANIFEST = "phase_manifest.json"
CAPACITY_INVALIDATING = (
    "load_generator_kept_up",
    "prompt_tokens_reconciled",
    "output_lengths_honored",
    "cache_cold",
)
"""The verdicts that make a capacity probe invalid (capacity/judge.py's INVALIDATING)."""
CERTIFIED_FROM = 90.0
"""Percentiles from here up carry a certification claim in validity.json (p50 needs none)."""
PHASE_SLACK_SECONDS = 0.001
"""How far the records' window may reach past AIPerf's profiling phase (their stamps are taken
by different processes; the phase holds the window, measured 3-18 ms longer)."""
PHASE_OVERHANG = (0.25, 0.1)
"""Without a phase manifest (AIPerf writes one only with warmup), the phase that throughput
implies may exceed the window by this much (relative, or seconds, whichever is larger).
Chosen, not measured over many runs: 10-18 ms was seen on 0.2-9 s windows; a throughput
planted 2x off is far outside it."""
RELATIVE = 1e-9


@dataclass(frozen=True)
class Finding:
    """One inconsistency: where (file or folder), which check, and what disagrees."""

    path: str
    check: str
    message: str


@dataclass
class CheckReport:
    """What was checked under ``root``, what disagreed, and differences that are explained."""

    root: str
    cases: int = 0
    trials_folders: int = 0
    capacity_searches: int = 0
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return not self.findings

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = "consistent" if self.consistent else "inconsistent"
        return data

    def add(self, path: Path, check: str, message: str) -> None:
        self.findings.append(Finding(str(path), check, message))


def check_folder(root: Path) -> CheckReport:
    """Every check over every saved result, trials listing and capacity search under ``root``."""
    report = CheckReport(str(root))
    cases: list[SavedCase] = []
    for result_path in _below(root, RESULT_FILE):
        try:
            cases.append(load_case(result_path.parent))
        except InferlabError as exc:
            report.add(result_path, "readable", str(exc))
    report.cases = len(cases)
    for case in cases:
        check_case(case, report)
    check_terminal(cases, report)
    for listing in _below(root, TRIALS_FILE):
        report.trials_folders += 1
        check_trials(listing, report)
    for document in _below(root, CAPACITY_FILE):
        report.capacity_searches += 1
        check_capacity(document, report)
    return report


def _below(root: Path, name: str) -> list[Path]:
    """``root/name`` and every ``name`` in its sub-folders (links not followed), in path order."""
    return sorted(p for p in root.rglob(name) if p.is_file() and not p.is_symlink())


def check_case(case: SavedCase, report: CheckReport) -> None:
    """Goodput against throughput, and a certification claim for every percentile printed."""
    where = case.directory / RESULT_FILE
    for message in goodput_problems(case):
        report.add(where, "goodput_within_throughput", message)
    if note := two_durations_note(case.result):
        report.notes.append(f"{case.directory}: {note}")
    if case.result.status is ClientStatus.SUCCEEDED and case.validity is not None:
        for message in certification_gaps(case):
            report.add(case.directory / VALIDITY_FILE, "percentiles_certified", message)


def goodput_problems(case: SavedCase) -> list[str]:
    """Good requests beyond the completed ones, goodput that is not good / window, or a
    throughput whose implied duration is not the records' window."""
    slo, result = case.result.request_slo, case.result
    if slo is None or result.status is not ClientStatus.SUCCEEDED:
        return []
    problems = []
    if slo.good_requests > result.completed_requests:
        problems.append(
            f"{slo.good_requests} good requests but {result.completed_requests} completed"
        )
    window = slo.profiling_duration_seconds
    if window > 0 and not _close(slo.goodput, slo.good_requests / window):
        problems.append(
            f"goodput {slo.goodput:.6g} req/s is not {slo.good_requests} good requests over "
            f"the {window:.6g} s window ({slo.good_requests / window:.6g} req/s)"
        )
    throughput = result.metrics.get("request_throughput")
    if throughput and window > 0:
        problem = _phase_problem(result.completed_requests / throughput, window, case.directory)
        if problem:
            problems.append(f"throughput {throughput:.6g} req/s: {problem}")
    return problems


def _phase_problem(implied: float, window: float, directory: Path) -> str | None:
    """Why AIPerf's duration (requests / throughput) cannot be its profiling phase: another
    length than phase_manifest.json's, or too short or too long to hold the records' window."""
    phase = profiling_phase_seconds(directory)
    if phase is not None and not _close(implied, phase):
        return f"implies {implied:.6g} s, AIPerf's profiling phase took {phase:.6g} s"
    if implied < window - PHASE_SLACK_SECONDS:
        return f"implies {implied:.6g} s, shorter than the records' window {window:.6g} s"
    if phase is None and implied > window + max(PHASE_OVERHANG[0] * window, PHASE_OVERHANG[1]):
        return f"implies {implied:.6g} s, far longer than the records' window {window:.6g} s"
    return None


def profiling_phase_seconds(directory: Path) -> float | None:
    """The profiling phase's duration from AIPerf's phase_manifest.json (None without one)."""
    try:
        manifest = orjson.loads((directory / AIPERF_DIR / PHASE_MANIFEST).read_bytes())
        phases = [p for p in manifest["phases"] if p.get("phase_kind") == "profiling"]
        if len(phases) != 1:
            return None
        return float(phases[0]["end_ns"] - phases[0]["start_ns"]) / 1e9
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None


def certification_gaps(case: SavedCase) -> list[str]:
    """Each percentile from p90 up that the result reports and validity.json does not judge."""
    claimed = {
        (m.get("metric"), float(c.get("percentile", -1)))
        for m in (case.validity or {}).get("certification") or []
        for c in m.get("claims") or []
    }
    gaps = []
    for key, _ in LATENCIES:
        for stat in STATS:
            if not stat.startswith("p") or f"{stat}_{key}" not in case.result.metrics:
                continue
            percentile = float(stat[1:])
            if percentile >= CERTIFIED_FROM and (key, percentile) not in claimed:
                gaps.append(f"{stat}_{key} is printed but validity.json has no claim for it")
    return gaps


def check_terminal(cases: Sequence[SavedCase], report: CheckReport) -> None:
    """The tables the terminal prints: a star on exactly the uncertified percentiles, and no
    ``None`` where a value or a reason belongs."""
    for case in cases:
        marks = uncertified(case.validity)
        for (metric, stat), text in latency_cells(case).items():
            _compare_mark(case, metric, stat, text, marks, report)
        if "None" in rendered(case_table(case.result, case.label, case.validity)):
            report.add(case.directory, "no_missing_values", "the case table prints 'None'")
    if len(cases) > 1:
        table = sweep_table(cases)
        for case, row in zip(cases, _rows(table), strict=True):
            marks = uncertified(case.validity)
            for header, metric in (("TTFT p99", "ttft_ms"), ("TPOT p99", "tpot_ms")):
                _compare_mark(case, metric, "p99", row[header], marks, report)
        if "None" in rendered(table):
            report.add(Path(report.root), "no_missing_values", "the sweep table prints 'None'")


def _compare_mark(
    case: SavedCase,
    metric: str,
    stat: str,
    text: str,
    marks: set[tuple[str, str]],
    report: CheckReport,
) -> None:
    if text == "-":
        return
    starred, due = text.endswith("*"), (metric, stat) in marks
    if starred != due:
        said = "starred" if starred else "not starred"
        truth = "uncertified" if due else "certified (or not judged)"
        report.add(
            case.directory,
            "percentiles_certified",
            f"terminal shows {stat} {metric} {text!r} {said}; validity.json says {truth}",
        )


def latency_cells(case: SavedCase) -> dict[tuple[str, str], str]:
    """(metric, stat) -> the cell the case table prints for it."""
    group = case_table(case.result, case.label, case.validity)
    parts = group.renderables if isinstance(group, Group) else [group]
    tables = [t for t in parts if isinstance(t, Table) and str(t.title) == "latency (ms)"]
    names = {label: key for key, label in LATENCIES}
    cells: dict[tuple[str, str], str] = {}
    for row in _rows(tables[0]) if tables else []:
        key = names.get(row["metric"], row["metric"])
        cells.update({(key, stat): row[stat] for stat in STATS if stat in row})
    return cells


def _rows(table: Table) -> Iterator[dict[str, str]]:
    columns = [(str(c.header), [str(cell) for cell in c.cells]) for c in table.columns]
    for i in range(table.row_count):
        yield {header: cells[i] for header, cells in columns}


def rendered(renderable: RenderableType) -> str:
    console = Console(file=io.StringIO(), width=250, color_system=None, record=True)
    console.print(renderable)
    return console.export_text()


def check_trials(listing_path: Path, report: CheckReport) -> None:
    """Each saved mean is the mean of the trials it lists, inside its own interval."""
    listing = _json(listing_path, report)
    if listing is None:
        return
    folder = listing_path.parent
    values: dict[str, list[float]] = {}
    for name in listing.get("succeeded") or []:
        try:
            metrics = load_case(folder / str(name)).result.metrics
        except InferlabError as exc:
            report.add(folder / str(name), "trials_listed", str(exc))
            return
        for key, value in metrics.items():
            values.setdefault(key, []).append(value)
    for summary in listing.get("summaries") or []:
        _check_summary(summary, values, listing_path, report)


def _check_summary(
    summary: Mapping[str, Any],
    values: Mapping[str, list[float]],
    where: Path,
    report: CheckReport,
) -> None:
    metric, mean = summary.get("metric"), summary.get("mean")
    trials = values.get(str(metric), [])
    if not trials or mean is None:
        report.add(where, "trials_mean", f"{metric}: mean {mean} has no trials' values behind it")
        return
    actual = sum(trials) / len(trials)
    if len(trials) != summary.get("trials") or not _close(float(mean), actual):
        report.add(
            where,
            "trials_mean",
            f"{metric}: saved mean {mean:.6g} over {summary.get('trials')} trials, the listed "
            f"trials' mean is {actual:.6g} over {len(trials)}",
        )
    low, high = summary.get("ci_low"), summary.get("ci_high")
    if low is not None and high is not None and not low <= mean <= high:
        report.add(where, "trials_mean", f"{metric}: mean {mean:.6g} outside [{low}, {high}]")


def check_capacity(path: Path, report: CheckReport) -> None:
    """Each probe's saved validity is what its folder's verdicts say; the answer has no empty
    value where a found capacity needs one."""
    document = _json(path, report)
    if document is None:
        return
    for probe in document.get("probes") or []:
        _check_probe(probe, path.parent, report)
    answer = document.get("answer") or {}
    if answer.get("capacity") is not None:
        for key in ("attainment_at_capacity", "goodput_at_capacity"):
            if answer.get(key) is None:
                report.add(path, "no_missing_values", f"capacity found but {key} is empty")
    planner = document.get("planner") or {}
    if document.get("status") == "succeeded" and not planner.get("name"):
        report.add(path, "no_missing_values", "the planner is not named")


def _check_probe(probe: Mapping[str, Any], root: Path, report: CheckReport) -> None:
    folder = root / str(probe.get("directory"))
    try:
        case = load_case(folder)
    except InferlabError as exc:
        report.add(folder, "capacity_verdicts", f"probe {probe.get('number')}: {exc}")
        return
    verdicts = (case.validity or {}).get("verdicts") or {}
    failed = [v for v in CAPACITY_INVALIDATING if verdicts.get(v) == "fail"]
    valid = case.result.status is ClientStatus.SUCCEEDED and not failed
    if bool(probe.get("valid")) != valid:
        said = "valid" if probe.get("valid") else "invalid"
        truth = f"failed {', '.join(failed)}" if failed else "passed every verdict that counts"
        if case.result.status is not ClientStatus.SUCCEEDED:
            truth = "the case failed"
        report.add(
            folder,
            "capacity_verdicts",
            f"capacity.json calls probe {probe.get('number')} {said}; report reads its folder "
            f"as {truth} (validity {(case.validity or {}).get('verdict')})",
        )


def _json(path: Path, report: CheckReport) -> dict[str, Any] | None:
    try:
        loaded = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        report.add(path, "readable", f"cannot be read as JSON ({exc})")
        return None
    if not isinstance(loaded, dict):
        report.add(path, "readable", "is not a JSON object")
        return None
    return loaded


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=RELATIVE)

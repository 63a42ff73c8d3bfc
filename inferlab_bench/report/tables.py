"""Readable rich tables for one case, a sweep of cases, and a comparison."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from inferlab_bench.load import Load
from inferlab_bench.protocol import BenchClientRequest, BenchClientResult, ClientStatus
from inferlab_bench.report.compare import Comparison, pair_digits
from inferlab_bench.report.rundir import SavedCase
from inferlab_bench.validity.trials import NoiseComparison

LATENCIES = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT (ITL)"), ("request_latency_ms", "E2E latency"))
STATS = ("mean", "p50", "p90", "p95", "p99", "max")
_P99_KEYS = ("ttft_ms", "tpot_ms")
"""The p99 columns of the sweep table."""


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def load_label(request: BenchClientRequest | None) -> str:
    """A short load name: ``c=4``, ``2.5/s``, ``gamma(0.5) 2/s`` or ``unbounded``."""
    if request is None:
        return "?"
    return Load.of(request.case.load_shape).label


UNCERTIFIED_NOTE = (
    "* not certified: too few requests for this percentile to be more than an estimate "
    "(MLPerf Inference's early-stopping rule, 99% confidence; validity.json says how many "
    "each needs)"
)


def uncertified(validity: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """(metric, ``p99``) pairs whose sample size does not certify them, from validity.json."""
    marks: set[tuple[str, str]] = set()
    for metric in (validity or {}).get("certification", []):
        for claim in metric.get("claims", []):
            if not claim.get("certified"):
                marks.add((metric.get("metric", ""), f"p{claim.get('percentile', 0):g}"))
    return marks


def two_durations_note(result: BenchClientResult) -> str | None:
    """Why goodput can print above throughput: goodput is good requests over the records'
    request window (the DESIGN's duration), AIPerf's throughput is requests over its whole
    profiling phase (phase_manifest.json's start to end), which holds that window and a few
    ms more at each end; when (nearly) every request was good, goodput comes out higher."""
    slo, throughput = result.request_slo, result.metrics.get("request_throughput")
    if slo is None or not throughput or slo.goodput <= throughput:
        return None
    return (
        f"goodput {slo.goodput:.3f} > throughput {throughput:.3f} req/s only because each has "
        f"its own duration: goodput the records' request window "
        f"({slo.profiling_duration_seconds:.4f} s), throughput AIPerf's whole profiling phase "
        f"({result.completed_requests / throughput:.4f} s); over one duration "
        f"{slo.good_requests} good <= {result.completed_requests} completed"
    )


def _marked(text: str, metric: str, stat: str, marks: set[tuple[str, str]]) -> str:
    return f"{text}*" if text != "-" and (metric, stat) in marks else text


def case_table(
    result: BenchClientResult,
    title: str = "case",
    validity: Mapping[str, Any] | None = None,
) -> RenderableType:
    """Counts, throughput, latency percentiles (``*`` where uncertified) and SLO evidence."""
    parts: list[RenderableType] = [_headline(result, title)]
    if result.status is ClientStatus.FAILED:
        parts.append(Text(f"error: {result.error}", style="bold red"))
    marks = uncertified(validity)
    latency = _latency_table(result.metrics, marks)
    if latency.row_count:
        parts.append(latency)
        if any(stat in STATS for _, stat in marks):
            parts.append(Text(UNCERTIFIED_NOTE, style="dim"))
    if result.request_slo is not None:
        slo = result.request_slo
        parts.append(
            Text(
                f"SLO: {slo.good_requests} good ({slo.good_request_ratio:.1%}), goodput "
                f"{slo.goodput:.3f} req/s over {slo.profiling_duration_seconds:.2f} s "
                f"({slo.profiling_duration_source})"
            )
        )
        if note := two_durations_note(result):
            parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)


def _headline(result: BenchClientResult, title: str) -> Table:
    table = Table(title=title, show_header=True, header_style="bold")
    for column in (
        "status",
        "completed",
        "failed",
        "req/s",
        "output tok/s",
        "total tok/s",
        "cache read",
    ):
        table.add_column(column, justify="right")
    m = result.metrics
    cache = m.get("prompt_cache_read_ratio")
    table.add_row(
        result.status.value,
        str(result.completed_requests),
        str(result.failed_requests),
        fmt(m.get("request_throughput"), 3),
        fmt(m.get("output_throughput")),
        fmt(m.get("total_token_throughput")),
        "-" if cache is None else f"{cache:.1%}",
    )
    return table


def _latency_table(metrics: dict[str, float], marks: set[tuple[str, str]]) -> Table:
    table = Table(title="latency (ms)", header_style="bold")
    table.add_column("metric")
    for stat in STATS:
        table.add_column(stat, justify="right")
    for key, label in LATENCIES:
        if f"p50_{key}" in metrics:
            cells = (_marked(fmt(metrics.get(f"{stat}_{key}")), key, stat, marks) for stat in STATS)
            table.add_row(label, *cells)
    return table


def sweep_table(cases: Sequence[SavedCase], title: str = "sweep") -> Table:
    """One row per case: load, throughput, key latency percentiles, goodput."""
    table = Table(title=title, header_style="bold")
    columns = (
        "case",
        "load",
        "status",
        "req/s",
        "out tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "E2E p50",
        "goodput",
        "good %",
    )
    for column in columns:
        table.add_column(
            column, justify="right" if column not in ("case", "load", "status") else "left"
        )
    marked = False
    notes = []
    for case in cases:
        m, slo = case.result.metrics, case.result.request_slo
        marks = uncertified(case.validity)
        p99 = {key: _marked(fmt(m.get(f"p99_{key}")), key, "p99", marks) for key in _P99_KEYS}
        marked = marked or any(cell.endswith("*") for cell in p99.values())
        if note := two_durations_note(case.result):
            notes.append(f"{case.label}: {note}")
        table.add_row(
            case.label,
            load_label(case.request),
            case.result.status.value,
            fmt(m.get("request_throughput"), 3),
            fmt(m.get("output_throughput")),
            fmt(m.get("p50_ttft_ms")),
            p99["ttft_ms"],
            fmt(m.get("p50_tpot_ms")),
            p99["tpot_ms"],
            fmt(m.get("p50_request_latency_ms")),
            "-" if slo is None else fmt(slo.goodput, 3),
            "-" if slo is None else f"{slo.good_request_ratio:.0%}",
        )
    captions = ([UNCERTIFIED_NOTE] if marked else []) + notes
    if captions:
        table.caption = "\n".join(captions)
    return table


def comparison_table(comparison: Comparison, a_name: str, b_name: str) -> RenderableType:
    """Metric deltas of B relative to A, with the better side marked."""
    trials_a, trials_b = comparison.trials
    judged = bool(comparison.noise)
    title = f"{a_name} (A) vs {b_name} (B)"
    if judged:
        title += f": means of {trials_a} vs {trials_b} trials"
    table = Table(title=title, header_style="bold")
    columns = ["metric", "A", "B", "delta", "delta %", "better"] + (["noise"] if judged else [])
    for column in columns:
        table.add_column(column, justify="left" if column in ("metric", "noise") else "right")
    for row in comparison.rows:
        style = {"a": "red", "b": "green", "same": ""}[row.better]
        digits = pair_digits(row.a, row.b)
        cells: list[str | Text] = [
            row.name,
            f"{row.a:,.{digits}f}",
            f"{row.b:,.{digits}f}",
            f"{row.delta:+,.{digits}f}",
            "-" if row.relative is None else f"{row.relative:+.1%}",
            Text(row.better.upper() if row.better != "same" else "=", style=style),
        ]
        if judged:
            cells.append(_noise_cell(comparison.noise_of(row.name)))
        table.add_row(*cells)
    notes: list[RenderableType] = [table, Text(_population_note(comparison.same_population))]
    for side, verdict in zip(("A", "B"), comparison.validity, strict=True):
        if verdict.startswith("fail"):
            notes.append(
                Text(
                    f"validity of {side}: {verdict} (its numbers above may be distorted)",
                    style="bold",
                )
            )
    if not judged:
        notes.append(Text("noise: not judged (one trial per side; run --trials N on both)"))
    if comparison.setup_differences is None:
        notes.append(Text("setup: unknown (request.json missing on one side)"))
    elif not comparison.setup_differences:
        notes.append(Text("setup: identical requests (apart from output paths)"))
    else:
        notes.append(Text("setup differs:\n  " + "\n  ".join(comparison.setup_differences)))
    for name, only in (("A", comparison.only_in_a), ("B", comparison.only_in_b)):
        if only:
            notes.append(Text(f"only in {name}: {', '.join(only)}"))
    return Group(*notes)


def _noise_cell(noise: NoiseComparison | None) -> Text:
    if noise is None or noise.noise == "unknown":
        return Text("unknown (needs 2+ trials each)", style="dim")
    p = "" if noise.p_value is None else f" (p={noise.p_value:.2g})"
    if noise.adjusted_p_value is not None and noise.judged_together > 1:
        p = f" (Holm p={noise.adjusted_p_value:.2g} over {noise.judged_together})"
    if noise.floor:
        p += f" [one trial: spread >= {noise.floor:.1%} floor]"
    if noise.negligible:
        return Text("within noise (both ~0)")
    if noise.noise == "beyond_noise":
        return Text(f"beyond noise{p}", style="bold")
    return Text(f"within noise{p}")


def _population_note(same: bool | None) -> str:
    if same is None:
        return "population: unknown on at least one side"
    return "population: same (sha256 and entries match)" if same else "population: DIFFERENT"

"""Reproduction verdicts as rich tables and plain sentences (one table per case)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from inferlab_bench.publish.verdict import CaseVerdict, MetricVerdict

STYLE = {"faster": "green", "slower": "red", "not comparable": "yellow"}


def verdict_table(case: CaseVerdict, title: str = "") -> Table:
    table = Table(
        title=title
        or f"{case.label}: published ({case.published_trials} trial(s)) "
        f"vs reproduced ({case.reproduced_trials})",
        title_justify="left",
    )
    for name in ("metric", "published", "reproduced", "difference", "95% CI", "verdict"):
        table.add_column(name, justify="left" if name in ("metric", "verdict") else "right")
    for m in case.metrics:
        table.add_row(
            m.metric,
            _num(m.published),
            _num(m.reproduced),
            difference_text(m),
            interval_text(m),
            f"[{STYLE.get(m.verdict, '')}]{m.verdict}[/]" if m.verdict in STYLE else m.verdict,
        )
    return table


def case_lines(case: CaseVerdict) -> list[str]:
    """What a person must know beside the table: why not comparable, caveats, limits, tests."""
    lines = [f"{case.label}: not comparable: {why}" for why in case.not_comparable]
    lines += [f"{case.label}: caveat: {c}" for c in case.caveats]
    lines += [f"{case.label}: limit: {lim}" for lim in case.limits]
    tests = sorted({m.test for m in case.metrics if m.test})
    lines += [f"{case.label}: test: {t}" for t in tests]
    return lines


def in_words(m: MetricVerdict) -> str:
    """One sentence: ``p99_ttft_ms is slower: 30.1 -> 41.2 (+36.9%, 95% CI +4.1 to +18.0)``."""
    if m.verdict == "not comparable":
        return f"{m.metric} is not comparable: {m.reason}"
    return (
        f"{m.metric} is {m.verdict}: {_num(m.published)} -> {_num(m.reproduced)} "
        f"({difference_text(m)}, 95% CI {interval_text(m)})"
    )


def summary_counts(cases: Sequence[CaseVerdict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for case in cases:
        for m in case.metrics:
            counts[m.verdict] = counts.get(m.verdict, 0) + 1
    return counts


def difference_text(m: MetricVerdict) -> str:
    if m.difference is None:
        return "-"
    rel = "" if m.relative is None else f" ({m.relative * 100:+.1f}%)"
    return f"{m.difference:+.3g}{rel}"


def interval_text(m: MetricVerdict) -> str:
    if m.ci_low is None or m.ci_high is None:
        return "-"
    return f"{m.ci_low:+.3g} to {m.ci_high:+.3g}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"

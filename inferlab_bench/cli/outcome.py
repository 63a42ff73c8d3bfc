"""How ``run``, ``sweep`` and ``demo`` show what they measured: tables, validity, file locations."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Group, RenderableType
from rich.text import Text

from inferlab_bench.cli.render import EXIT_FAILED, print_json, show
from inferlab_bench.cli.wording import in_flag_words
from inferlab_bench.protocol import ClientStatus
from inferlab_bench.report.rundir import SavedCase
from inferlab_bench.report.sessions import read_sessions, sessions_lines
from inferlab_bench.report.tables import case_table, load_label, sweep_table
from inferlab_bench.validity.report import (
    VALIDITY_SCHEMA,
    ValidityDocument,
    failed_check_text,
    summary_lines,
    trial_lines,
)
from inferlab_bench.validity.trials import MetricSummary
from inferlab_bench.validity.verdict import Verdict


def render_cases(
    cases: Sequence[SavedCase],
    summaries: Sequence[MetricSummary],
    *,
    as_json: bool,
    out: Path,
    title: str = "",
) -> None:
    if as_json:
        print_json(cases_document(cases, summaries, key=lambda c: str(c.directory)))
        return
    if len(cases) == 1:
        table = case_table(
            cases[0].result,
            title=title or load_label(cases[0].request),
            validity=cases[0].validity,
        )
        show(_unsaid(table))
        conversation = read_sessions(cases[0].directory)
        if conversation is not None:
            show(Text("\n".join(sessions_lines(conversation))))
    else:
        show(sweep_table(cases, title=title or str(out)))
        for case in cases:  # a conversation sweep: each point's reuse verdict
            conversation = read_sessions(case.directory)
            if conversation is not None:
                show(Text(f"{load_label(case.request)}: {sessions_lines(conversation)[-1]}"))
    show_verdicts(cases, summaries)
    print(f"results in {out.resolve()}", file=sys.stderr)


def cases_document(
    cases: Sequence[SavedCase],
    summaries: Sequence[MetricSummary],
    *,
    key: Callable[[SavedCase], str],
) -> dict[str, Any]:
    """The ``--json`` view of saved cases: results, validity, trial summaries."""
    return {
        "cases": {key(c): c.result.model_dump(mode="json") for c in cases},
        "validity": {key(c): c.validity for c in cases},
        "trials": [s.model_dump(mode="json") for s in summaries],
    }


def show_verdicts(cases: Sequence[SavedCase], summaries: Sequence[MetricSummary]) -> None:
    """Each case's validity (in full for a single case), then the trial summaries."""
    for case in cases:
        for line in validity_lines(case, detailed=len(cases) == 1):
            show(Text(line))
    if any(_prompts_miscounted(case) for case in cases):
        show(Text(PROMPT_TOKENS_HINT))
    for line in trial_lines(tuple(summaries)):
        show(Text(line))


PROMPT_TOKENS_HINT = (
    "hint: prompt tokens not reconciled: the server most likely tokenizes with another "
    "tokenizer than --tokenizer (a simulator started without --tokenizer counts words "
    "roughly); give the server the model's tokenizer"
)


def _prompts_miscounted(case: SavedCase) -> bool:
    verdicts = (case.validity or {}).get("verdicts") or {}
    return bool(verdicts.get("prompt_tokens_reconciled") == "fail")


def validity_lines(case: SavedCase, *, detailed: bool = False) -> list[str]:
    """One line of verdicts per case; for a single case every verdict with its figures."""
    doc = case.validity
    if not doc:
        return []
    parsed = _document(doc)
    if detailed and parsed is not None:
        return summary_lines(parsed)
    verdicts = ", ".join(f"{k}={v}" for k, v in doc.get("verdicts", {}).items())
    line = f"{case.label}: validity {doc.get('verdict')} ({verdicts})"
    if parsed is not None and parsed.failures is not None and parsed.failures.failed:
        line += f"; {parsed.failures.in_words()}"
    if checks := _failed_checks(parsed):
        line += "; failed: " + ", ".join(checks)
    return [line, *_failure_sentences(parsed)]


def _failure_sentences(doc: ValidityDocument | None) -> list[str]:
    """Under a case's line, the plain sentence of each failed verdict, and of a run that
    never settled."""
    if doc is None:
        return []
    sentences = [doc.explanations[n] for n in doc.failed() if n in doc.explanations]
    steady = doc.steady_state
    if steady is not None and steady.reached is Verdict.FAIL:
        sentences.append(steady.sentence)
    return [f"  {s}" for s in sentences]


def _document(doc: dict[str, Any]) -> ValidityDocument | None:
    """The saved validity.json as our model; None for another schema or a damaged file, which
    are shown as saved."""
    if doc.get("schema_name") != VALIDITY_SCHEMA:
        return None
    try:
        return ValidityDocument.model_validate(doc)
    except ValidationError:
        return None


def _failed_checks(doc: ValidityDocument | None) -> list[str]:
    """Each failed check as ``name observed (bound b)``; none for a document we cannot read."""
    return [] if doc is None else [failed_check_text(c) for c in doc.failed_checks()]


def strict_failures(cases: Sequence[SavedCase]) -> list[str]:
    """What ``--strict`` refuses: ``case: failed verdicts (failed checks)``, per case."""
    failed = []
    for case in cases:
        verdicts = (case.validity or {}).get("verdicts") or {}
        names = [name for name, verdict in verdicts.items() if verdict == "fail"]
        if not names:
            continue
        checks = _failed_checks(_document(case.validity or {}))
        why = f" ({', '.join(checks)})" if checks else ""
        failed.append(f"{case.label}: {', '.join(names)}{why}")
    return failed


def _unsaid(table: RenderableType) -> RenderableType:
    """The case's table without its error line: ``exit_code`` says the error once, on stderr
    and in flag words (result.json keeps it in the request's field words)."""
    if not isinstance(table, Group):
        return table
    kept = [
        part
        for part in table.renderables
        if not (isinstance(part, Text) and part.plain.startswith("error: "))
    ]
    return Group(*kept)


def exit_code(cases: Sequence[SavedCase], *, strict: bool) -> int:
    """Non-zero when a case failed, or (with ``--strict``) when a validity verdict failed.
    Each failed case's error is one line on stderr, in flag words."""
    code = 0
    for case in cases:
        if case.result.status is ClientStatus.FAILED:
            error = in_flag_words(case.result.error or "")
            print(f"inferlab-bench: error: {case.label}: {error}", file=sys.stderr)
            code = EXIT_FAILED
    if strict:
        for failure in strict_failures(cases):
            print(f"inferlab-bench: --strict: validity verdict failed: {failure}", file=sys.stderr)
            code = EXIT_FAILED
    return code

"""Integrity checks: the run measured what was asked (population identity, complete warmup)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from inferlab_bench.case.records import CaseRecords, RecordColumns
from inferlab_bench.errors import RecordsError
from inferlab_bench.layout import session_id


def expected_conversations(first: int, count: int) -> list[str]:
    """The population session ids of one slice: ``inferlab-NNNNNNNN`` for first..first+count-1."""
    return [session_id(index) for index in range(first, first + count)]


def check_population_identity(records: CaseRecords, warmup: int, request_count: int) -> None:
    """Warmup used entries 0..w-1 and profiling w..w+n-1, each exactly once."""
    _check_slice("warmup", records.warmup.conversation_id, expected_conversations(0, warmup))
    _check_slice(
        "profiling",
        records.profiling.conversation_id,
        expected_conversations(warmup, request_count),
    )


def check_warmup_complete(warmup: RecordColumns, expected: int) -> None:
    """All warmup requests ran, none failed or was cancelled."""
    if len(warmup) != expected:
        raise RecordsError(f"warmup: expected {expected} records, AIPerf wrote {len(warmup)}")
    if np.any(warmup.has_error):
        index = int(np.flatnonzero(warmup.has_error)[0])
        raise RecordsError(
            f"warmup: {int(warmup.has_error.sum())} of {expected} requests failed "
            f"(first: {warmup.error_message[index]})",
            hint="the server is not ready; warmup must complete before measuring",
        )
    if np.any(warmup.was_cancelled):
        raise RecordsError(f"warmup: {int(warmup.was_cancelled.sum())} requests were cancelled")


def _check_slice(phase: str, found: list[str | None], expected: list[str]) -> None:
    have = Counter(found)
    if have == Counter(expected):
        return
    missing = sorted(set(expected) - set(have))
    unexpected = sorted(str(item) for item in set(have) - set(expected))
    repeated = sorted(str(item) for item, count in have.items() if count > 1)
    details = [
        f"{label} {_few(items)}"
        for label, items in (
            ("missing", missing),
            ("unexpected", unexpected),
            ("repeated", repeated),
        )
        if items
    ]
    raise RecordsError(
        f"{phase}: records do not match population entries {_span(expected)}: "
        + "; ".join(details),
        hint="AIPerf did not replay the population slice sequentially",
    )


def _span(expected: list[str]) -> str:
    return f"{expected[0]}..{expected[-1]}" if expected else "(none)"


def _few(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"

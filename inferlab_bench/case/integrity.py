"""Integrity checks: the run measured what was asked (population identity, warmup, cold start)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class ColdStartVerdict:
    """Whether the first profiling requests after the reset found the cache empty."""

    checked_requests: int
    first_request_cached_tokens: int
    max_cached_tokens: int
    shared_prefix_bound: int | None
    """The most any checked request may hit (its prompt's longest prefix shared with a
    request that started before it); None when the prompts are unknown."""
    exceeding_requests: int
    cold: bool
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {
            "checked_requests": self.checked_requests,
            "first_request_cached_tokens": self.first_request_cached_tokens,
            "max_cached_tokens": self.max_cached_tokens,
            "shared_prefix_bound": self.shared_prefix_bound,
            "exceeding_requests": self.exceeding_requests,
            "cold": self.cold,
            "reason": self.reason,
        }


def _wave_order(profiling: RecordColumns, size: int) -> np.ndarray | None:
    """Indices of the first ``size`` profiling requests by start; None when the server
    reports no cached tokens (nothing to judge)."""
    cached = profiling.metric("usage_prompt_cache_read_tokens")
    if not len(profiling) or np.all(np.isnan(cached)):
        return None
    return np.argsort(profiling.start_ns, kind="stable")[: max(1, size)]


def first_wave(profiling: RecordColumns, size: int) -> list[str | None] | None:
    """Conversation ids of the first ``size`` profiling requests by start (see ``_wave_order``)."""
    order = _wave_order(profiling, size)
    if order is None:
        return None
    return [profiling.conversation_id[int(i)] for i in order]


def cold_start_verdict(
    profiling: RecordColumns, *, first_wave: int, prefix_bounds: Sequence[int] | None
) -> ColdStartVerdict | None:
    """Judge the first ``first_wave`` profiling requests (by start); None if no cache is reported.

    ``prefix_bounds[k]`` is what the k-th started request may hit: the tokens its prompt
    shares with one started before it (0 for the earliest). Without bounds only the earliest
    request is judged: it must hit nothing at all.
    """
    order = _wave_order(profiling, first_wave)
    if order is None:
        return None
    cached = profiling.metric("usage_prompt_cache_read_tokens")
    wave = np.nan_to_num(cached[order], nan=0.0).astype(np.int64)
    if prefix_bounds is None:
        allowed = np.zeros(1, dtype=np.int64)
        judged = wave[:1]
    else:
        if len(prefix_bounds) != len(wave):
            raise ValueError(f"{len(prefix_bounds)} prefix bounds for {len(wave)} requests")
        allowed = np.asarray(prefix_bounds, dtype=np.int64)
        allowed[0] = 0
        judged = wave
    exceeding = int(np.sum(judged > allowed))
    first, highest = int(wave[0]), int(wave.max())
    bound = None if prefix_bounds is None else int(allowed.max())
    return ColdStartVerdict(
        checked_requests=int(judged.shape[0]),
        first_request_cached_tokens=first,
        max_cached_tokens=highest,
        shared_prefix_bound=bound,
        exceeding_requests=exceeding,
        cold=exceeding == 0,
        reason=_reason(first, exceeding, int(judged.shape[0]), bound),
    )


def _reason(first: int, exceeding: int, checked: int, bound: int | None) -> str:
    if first:
        return f"the first profiling request read {first} cached prompt tokens after the reset"
    if exceeding:
        return (
            f"{exceeding} of {checked} first-wave requests read more cached tokens than their "
            "prompts share with the requests started before them"
        )
    if bound is None:
        return "the first profiling request read no cached tokens (other prompts unknown)"
    return (
        f"no first-wave request read more than its prompt shares with earlier ones "
        f"(at most {bound} tokens)"
    )


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

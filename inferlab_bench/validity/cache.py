"""Cache coldness: prompt-cache read ratio per phase, and the one judgement of a cold start.

After a real reset nothing is cached. The first wave of profiling requests (those that start
before any can have finished: the concurrency, capped) is judged by start order: the
earliest must read no cached token at all, and each later one at most the token prefix its
prompt shares with a prompt that started before it (the chat template's preamble, a common
opening), which the earlier request may just have written. Anything cached beyond that
came from before the reset. Without the prompts (synthetic ones) only the earliest request
is judged. The case stage computes the shared prefixes (it has the tokenizer); the verdict
is made here, once, for both the case's error and validity.json.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from inferlab_bench.validity.inputs import Int64Array, PhaseRecords
from inferlab_bench.validity.verdict import (
    Check,
    Figures,
    Verdict,
    combine_checks,
    not_applicable,
    unknown,
)

COLD_WAVE = 256
"""At most this many first profiling requests are judged."""


class PhaseCache(Figures):
    """Cached prompt tokens over prompt tokens of one phase's succeeded requests."""

    phase: str
    prompt_tokens: int
    cached_prompt_tokens: int | None
    read_ratio: float | None


class ColdStart(Figures):
    """The first wave after a reset against what each request may legitimately hit."""

    checked_requests: int
    first_request_cached_tokens: int
    max_cached_tokens: int
    shared_prefix_bound: int | None
    """The most any checked request may hit; None when the prompts are unknown."""
    exceeding_requests: int
    cold: bool
    reason: str


class CacheColdness(Figures):
    """The verdict ``cache_cold`` and its figures."""

    cache_cold: Verdict
    reset_requested: bool
    phases: tuple[PhaseCache, ...]
    cold_start: ColdStart | None
    checks: tuple[Check, ...]


def phase_cache(phase: str, records: PhaseRecords) -> PhaseCache:
    """Read ratio of one phase (None when the server reports no cached tokens)."""
    ok = records.succeeded
    prompt = records.prompt_tokens[ok]
    cached = records.cached_prompt_tokens[ok]
    reported = np.isfinite(cached)
    total_prompt = float(np.nansum(prompt))
    if not reported.any():
        return PhaseCache(
            phase=phase, prompt_tokens=int(total_prompt), cached_prompt_tokens=None, read_ratio=None
        )
    total_cached = float(cached[reported].sum())
    denominator = float(np.nansum(prompt[reported]))
    ratio = total_cached / denominator if denominator > 0 else None
    return PhaseCache(
        phase=phase,
        prompt_tokens=int(total_prompt),
        cached_prompt_tokens=int(total_cached),
        read_ratio=ratio,
    )


def _wave_order(records: PhaseRecords, size: int) -> Int64Array | None:
    """Indices of the first ``size`` requests by start; None when no cached tokens are
    reported (nothing to judge)."""
    if not len(records) or np.all(np.isnan(records.cached_prompt_tokens)):
        return None
    order: Int64Array = np.argsort(records.start_ns, kind="stable")[: max(1, min(size, COLD_WAVE))]
    return order


def first_wave(records: PhaseRecords, size: int) -> list[str] | None:
    """Session ids of the first ``size`` requests by start (None: the server reports no
    cached tokens), for the caller to find their prompts."""
    order = _wave_order(records, size)
    return None if order is None else [records.session_ids[int(i)] for i in order]


def cold_start(
    records: PhaseRecords, size: int, prefix_bounds: Sequence[int] | None
) -> ColdStart | None:
    """Judge the first ``size`` requests (``prefix_bounds`` in the order ``first_wave``
    gave); None when the server reports no cached tokens."""
    order = _wave_order(records, size)
    if order is None:
        return None
    wave = np.nan_to_num(records.cached_prompt_tokens[order], nan=0.0).astype(np.int64)
    if prefix_bounds is None:
        allowed = np.zeros(1, dtype=np.int64)
        judged = wave[:1]
    else:
        if len(prefix_bounds) != len(wave):
            raise ValueError(f"{len(prefix_bounds)} prefix bounds for {len(wave)} requests")
        allowed = np.asarray(prefix_bounds, dtype=np.int64)
        allowed[0] = 0  # the earliest request may never hit anything
        judged = wave
    exceeding = int(np.sum(judged > allowed))
    first, checked = int(wave[0]), int(judged.shape[0])
    bound = None if prefix_bounds is None else int(allowed.max())
    return ColdStart(
        checked_requests=checked,
        first_request_cached_tokens=first,
        max_cached_tokens=int(wave.max()),
        shared_prefix_bound=bound,
        exceeding_requests=exceeding,
        cold=exceeding == 0,
        reason=_reason(first, exceeding, checked, bound),
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


def assess_cache(
    profiling: PhaseRecords,
    warmup: PhaseRecords | None,
    reset_requested: bool,
    cold: ColdStart | None = None,
) -> CacheColdness:
    """Per-phase ratios and, when a reset was asked, whether profiling started cold."""
    phases = [phase_cache("profiling", profiling)]
    if warmup is not None and len(warmup):
        phases.insert(0, phase_cache("warmup", warmup))
    if not reset_requested:
        check = not_applicable("first_wave_cold", "no prefix-cache reset was asked")
    elif cold is None:
        check = unknown("first_wave_cold", "the server reports no cached prompt tokens")
    else:
        verdict = Verdict.PASS if cold.cold else Verdict.FAIL
        check = Check(name="first_wave_cold", verdict=verdict, detail=cold.reason)
    return CacheColdness(
        cache_cold=combine_checks([check]),
        reset_requested=reset_requested,
        phases=tuple(phases),
        cold_start=cold,
        checks=(check,),
    )

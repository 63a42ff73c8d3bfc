"""Cache coldness: prompt-cache read ratio per phase and whether the measured phase began cold.

After a real reset nothing is cached, so whichever of the first requests reaches the
server first reads no cached token at all: the smallest cached count among the first
``first_requests`` started profiling requests must be 0. A reset that did nothing leaves
at least the shared chat-template prefix cached, and every one of them reads it. The case
stage's own post-reset verdict, when it gives one, is carried next to this check.
"""

from __future__ import annotations

import numpy as np

from inferlab_bench.validity.inputs import PhaseRecords
from inferlab_bench.validity.verdict import (
    Check,
    Figures,
    Verdict,
    at_most,
    combine_checks,
    not_applicable,
    unknown,
)

FIRST_REQUESTS = 4


class PhaseCache(Figures):
    """Cached prompt tokens over prompt tokens of one phase's succeeded requests."""

    phase: str
    prompt_tokens: int
    cached_prompt_tokens: int | None
    read_ratio: float | None


class CacheColdness(Figures):
    """The verdict ``cache_cold`` and its figures."""

    cache_cold: Verdict
    reset_requested: bool
    phases: tuple[PhaseCache, ...]
    first_requests_min_cached_tokens: int | None
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


def first_requests_min_cached(records: PhaseRecords, count: int = FIRST_REQUESTS) -> int | None:
    """Fewest cached tokens among the first ``count`` started requests (None: not reported)."""
    first = np.argsort(records.start_ns, kind="stable")[:count]
    cached = records.cached_prompt_tokens[first]
    cached = cached[np.isfinite(cached)]
    return int(cached.min()) if cached.size else None


def stage_check(post_reset_verdict: bool | None) -> Check:
    """The case stage's post-reset verdict as a check (not applicable when it gave none)."""
    if post_reset_verdict is None:
        return not_applicable("case_post_reset_check", "the case stage gave no verdict")
    verdict = Verdict.PASS if post_reset_verdict else Verdict.FAIL
    return Check(
        name="case_post_reset_check",
        verdict=verdict,
        detail="first profiling requests hit nothing beyond the template prefix",
    )


def assess_cache(
    profiling: PhaseRecords,
    warmup: PhaseRecords | None,
    reset_requested: bool,
    post_reset_verdict: bool | None = None,
    first_requests: int = FIRST_REQUESTS,
) -> CacheColdness:
    """Per-phase ratios and, when a reset was asked, whether profiling started cold."""
    phases = [phase_cache("profiling", profiling)]
    if warmup is not None and len(warmup):
        phases.insert(0, phase_cache("warmup", warmup))
    lowest = first_requests_min_cached(profiling, first_requests)
    if not reset_requested:
        checks = [not_applicable("first_requests_cold", "no prefix-cache reset was asked")]
    else:
        checks = [_first_check(lowest, first_requests), stage_check(post_reset_verdict)]
    return CacheColdness(
        cache_cold=combine_checks(checks),
        reset_requested=reset_requested,
        phases=tuple(phases),
        first_requests_min_cached_tokens=lowest,
        checks=tuple(checks),
    )


def _first_check(lowest: int | None, count: int) -> Check:
    if lowest is None:
        return unknown("first_requests_cold", "the server reports no cached prompt tokens")
    return at_most(
        "first_requests_cold",
        float(lowest),
        0.0,
        f"fewest cached tokens among the first {count} profiling requests",
    )

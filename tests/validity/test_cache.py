"""Cache coldness: cached reads after a reset flip the verdict; ratios are per phase."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab_bench.validity import Verdict, assess_cache, cold_start, first_wave
from tests.validity.builders import T0, records

STARTS = T0 + np.arange(10, dtype=np.int64) * 10**7


def test_a_cold_start_after_a_reset_passes_with_later_prefix_hits() -> None:
    cached = np.full(10, 16.0)
    cached[0] = 0.0
    profiling = records(STARTS, prompt=100.0, cached=cached)
    cold = cold_start(profiling, 10, [0] + [16] * 9)
    result = assess_cache(profiling, None, True, cold)
    assert result.cache_cold is Verdict.PASS
    assert result.cold_start == cold
    assert result.phases[0].read_ratio == pytest.approx(144 / 1000)


def test_cached_reads_on_every_first_request_after_a_reset_fail() -> None:
    profiling = records(STARTS, cached=16.0)
    result = assess_cache(profiling, None, True, cold_start(profiling, 4, None))
    assert result.cache_cold is Verdict.FAIL
    assert result.cold_start is not None
    assert result.cold_start.first_request_cached_tokens == 16


def test_no_reported_cache_reads_are_unknown() -> None:
    profiling = records(STARTS, cached=np.nan)
    assert cold_start(profiling, 4, None) is None and first_wave(profiling, 4) is None
    result = assess_cache(profiling, None, True, None)
    assert result.cache_cold is Verdict.UNKNOWN
    assert result.phases[0].read_ratio is None


def test_cold_start_judges_the_first_wave_against_shared_prefixes() -> None:
    profiling = records(STARTS[:3], cached=np.array([0.0, 16.0, 80.0]))
    verdict = cold_start(profiling, 2, [0, 16])
    assert verdict is not None and verdict.cold and verdict.checked_requests == 2
    assert verdict.shared_prefix_bound == 16 and verdict.exceeding_requests == 0
    # The third request read 80 tokens but shares only 16 with the earlier prompts.
    third = cold_start(profiling, 3, [0, 16, 16])
    assert third is not None and not third.cold and third.exceeding_requests == 1
    assert "1 of 3 first-wave requests" in third.reason
    # Without the prompts only the earliest request is judged.
    unknown = cold_start(profiling, 3, None)
    assert unknown is not None and unknown.cold and unknown.checked_requests == 1
    assert unknown.shared_prefix_bound is None
    warm = records(STARTS[:2], cached=np.array([32.0, 0.0]))
    verdict = cold_start(warm, 2, [5, 40])
    # The earliest request may never hit anything, whatever its bound says.
    assert verdict is not None and not verdict.cold
    assert "read 32 cached prompt tokens" in verdict.reason


def test_first_wave_lists_sessions_in_start_order() -> None:
    starts = STARTS[:3].copy()
    starts[0] += 10**9  # entry 0 started last
    assert first_wave(records(starts), 2) == ["inferlab-00000001", "inferlab-00000002"]


def test_without_a_reset_the_verdict_does_not_apply_but_ratios_are_reported() -> None:
    warm = records(STARTS[:4], prompt=50.0, cached=25.0)
    result = assess_cache(records(STARTS, cached=100.0), warm, False)
    assert result.cache_cold is Verdict.NOT_APPLICABLE
    assert [(p.phase, p.read_ratio) for p in result.phases] == [("warmup", 0.5), ("profiling", 1.0)]

"""Cache coldness: cached reads after a reset flip the verdict; ratios are per phase."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab_bench.validity import Verdict, assess_cache
from tests.validity.builders import T0, records

STARTS = T0 + np.arange(10, dtype=np.int64) * 10**7


def test_a_cold_start_after_a_reset_passes_with_later_prefix_hits() -> None:
    cached = np.full(10, 16.0)
    cached[0] = 0.0
    result = assess_cache(records(STARTS, prompt=100.0, cached=cached), None, True)
    assert result.cache_cold is Verdict.PASS
    assert result.phases[0].read_ratio == pytest.approx(144 / 1000)


def test_cached_reads_on_every_first_request_after_a_reset_fail() -> None:
    result = assess_cache(records(STARTS, cached=16.0), None, True)
    assert result.cache_cold is Verdict.FAIL
    assert result.first_requests_min_cached_tokens == 16


def test_the_case_stage_verdict_is_carried() -> None:
    result = assess_cache(records(STARTS, cached=0.0), None, True, post_reset_verdict=False)
    assert result.cache_cold is Verdict.FAIL
    assert (
        assess_cache(records(STARTS), None, True, post_reset_verdict=True).cache_cold
        is Verdict.PASS
    )


def test_no_reported_cache_reads_are_unknown() -> None:
    result = assess_cache(records(STARTS, cached=np.nan), None, True)
    assert result.cache_cold is Verdict.UNKNOWN
    assert result.phases[0].read_ratio is None


def test_without_a_reset_the_verdict_does_not_apply_but_ratios_are_reported() -> None:
    warm = records(STARTS[:4], prompt=50.0, cached=25.0)
    result = assess_cache(records(STARTS, cached=100.0), warm, False)
    assert result.cache_cold is Verdict.NOT_APPLICABLE
    assert [(p.phase, p.read_ratio) for p in result.phases] == [("warmup", 0.5), ("profiling", 1.0)]

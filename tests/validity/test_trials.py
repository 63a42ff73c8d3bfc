"""Repeated trials: t intervals, Welch's test, and honest unknowns with one trial."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from inferlab_bench.validity import Verdict, compare_trials, summarize, summarize_trials, welch


def test_the_interval_is_the_t_interval_of_the_mean() -> None:
    s = summarize("request_throughput", [1.0, 2.0, 3.0, 4.0, 5.0])
    half = stats.t.ppf(0.975, 4) * math.sqrt(2.5) / math.sqrt(5)
    assert (s.mean, s.stddev) == (3.0, pytest.approx(math.sqrt(2.5)))
    assert s.ci_half_width == pytest.approx(half)
    assert (s.ci_low, s.ci_high) == (pytest.approx(3 - half), pytest.approx(3 + half))
    assert s.verdict is Verdict.PASS


def test_the_interval_narrows_with_more_trials() -> None:
    values = [10.0, 11.0, 9.0, 10.5, 9.5]
    narrow = summarize("m", values * 4).ci_half_width
    wide = summarize("m", values).ci_half_width
    assert narrow is not None and wide is not None and narrow < wide / 2


def test_one_trial_is_unknown_never_zero() -> None:
    s = summarize("request_throughput", [3.0])
    assert s.verdict is Verdict.UNKNOWN and s.stddev is None and s.ci_half_width is None


def test_non_finite_trial_values_are_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        summarize("m", [1.0, math.nan])


def test_welch_matches_scipy_and_flags_a_real_difference() -> None:
    a, b = [10.0, 10.2, 9.9, 10.1], [11.0, 11.3, 10.8, 11.1, 11.2]
    c = welch("m", a, b)
    ref = stats.ttest_ind(b, a, equal_var=False)
    assert c.t_statistic == pytest.approx(ref.statistic)
    assert c.p_value == pytest.approx(ref.pvalue)
    assert c.noise == "beyond_noise"
    assert c.ci_low is not None and c.ci_low > 0


def test_welch_overlapping_samples_are_within_noise() -> None:
    c = welch("m", [10.0, 12.0, 8.0, 11.0], [10.5, 9.0, 12.5, 10.0])
    assert c.noise == "within_noise" and c.ci_low is not None and c.ci_low < 0 < (c.ci_high or 0)


def test_welch_with_one_trial_on_a_side_is_unknown() -> None:
    c = welch("m", [10.0], [11.0, 11.5])
    assert c.noise == "unknown" and c.p_value is None and c.difference == pytest.approx(1.25)


def test_welch_without_spread() -> None:
    assert welch("m", [1.0, 1.0], [1.0, 1.0]).noise == "within_noise"
    assert welch("m", [1.0, 1.0], [2.0, 2.0]).noise == "beyond_noise"


def test_summaries_and_comparisons_over_metric_dicts() -> None:
    a = [{"request_throughput": 10.0, "p50_ttft_ms": 5.0}, {"request_throughput": 10.4}]
    b = [{"request_throughput": 12.0, "p50_ttft_ms": 5.0}, {"request_throughput": 12.2}]
    assert [s.metric for s in summarize_trials(a)] == ["request_throughput"]
    assert [c.metric for c in compare_trials(a, b)] == ["request_throughput"]

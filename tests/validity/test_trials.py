"""Repeated trials: t intervals, Welch's test, and honest unknowns with one trial."""

from __future__ import annotations

import math

import numpy as np
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


def _null_sets(rng: np.random.Generator, metrics: int, trials: int) -> list[dict[str, float]]:
    return [{f"m{k}": float(rng.normal(100.0, 5.0)) for k in range(metrics)} for _ in range(trials)]


def test_null_differences_over_ten_metrics_hold_the_stated_rate() -> None:
    """400 null comparisons of 3 vs 3 trials over 10 metrics: Holm keeps the share with any
    metric beyond noise near 5%; Welch alone at 5% per metric flags about a third."""
    rng = np.random.default_rng(7)
    any_beyond = any_raw = 0
    for _ in range(400):
        a, b = _null_sets(rng, 10, 3), _null_sets(rng, 10, 3)
        judged = compare_trials(a, b, [f"m{k}" for k in range(10)])
        any_beyond += any(c.noise == "beyond_noise" for c in judged)
        any_raw += any(c.p_value is not None and c.p_value < 0.05 for c in judged)
    assert any_beyond / 400 <= 0.07, any_beyond
    assert any_raw / 400 > 0.25, any_raw


def test_a_real_shift_is_still_found_among_ten_metrics() -> None:
    rng = np.random.default_rng(3)
    a, b = _null_sets(rng, 10, 4), _null_sets(rng, 10, 4)
    for trial in b:
        trial["m0"] *= 2.0  # twice the decode time
    judged = {c.metric: c for c in compare_trials(a, b, [f"m{k}" for k in range(10)])}
    assert judged["m0"].noise == "beyond_noise" and judged["m0"].judged_together == 10
    assert judged["m0"].adjusted_p_value is not None
    assert judged["m0"].adjusted_p_value >= (judged["m0"].p_value or 0)


def test_two_means_near_zero_are_never_beyond_noise() -> None:
    """The compare that printed 'prompt_cache_read_ratio 0.000 vs 0.000, +13.5%, beyond noise'."""
    a = [{"prompt_cache_read_ratio": x} for x in (0.00020, 0.00020, 0.00020)]
    b = [{"prompt_cache_read_ratio": x} for x in (0.000227, 0.000227, 0.000228)]
    (c,) = compare_trials(a, b, ["prompt_cache_read_ratio"])
    assert c.p_value is not None and c.p_value < 1e-3  # the test alone would call it
    assert c.negligible and c.noise == "within_noise"


def test_one_trial_against_several_is_judged_with_the_run_to_run_floor() -> None:
    """A single trial's spread is unknown: taken to be at least the floor (docs/calibration.md).
    Seeded null sets (1 vs 3 trials, the server moving run to run by the floor) are called
    beyond noise on at most the stated 5%; a 2x TPOT is beyond noise every time; a metric
    without a floor stays unknown."""
    from inferlab_bench.validity.trials import COMPARE_FLOORS

    rng = np.random.default_rng(11)
    floor = COMPARE_FLOORS["p50_tpot_ms"]

    def trials(k: int, scale: float = 1.0) -> list[dict[str, float]]:
        drawn = 15.0 * scale * (1.0 + rng.normal(0.0, floor, k))
        return [{"p50_tpot_ms": float(v), "m": float(v)} for v in drawn]

    both = ("p50_tpot_ms", "m")
    nulls = [compare_trials(trials(1), trials(3), both) for _ in range(200)]
    beyond = sum(c[0].noise == "beyond_noise" for c in nulls)
    assert beyond <= 10, beyond  # 5% of 200
    assert nulls[0][0].floor == floor and nulls[0][1].noise == "unknown"
    slower = [compare_trials(trials(3), trials(1, scale=2.0), both)[0] for _ in range(20)]
    assert all(c.noise == "beyond_noise" for c in slower)
    # Three trials that agree by chance do not make one trial's spread zero.
    close = welch("p50_tpot_ms", [15.0, 15.001, 14.999], [15.3], floor=floor)
    assert close.noise == "within_noise" and close.floor == floor

"""Comparison of two saved cases: deltas, better side, population and setup differences."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inferlab_bench.errors import RequestError
from inferlab_bench.report.compare import (
    compare_cases,
    compare_trial_sets,
    diff_paths,
    metric_delta,
)
from inferlab_bench.report.rundir import find_cases, load_case, load_trials
from tests.protocol import examples


def save_case(directory: Path, metrics: dict[str, float], request: dict[str, Any] | None) -> Path:
    directory.mkdir(parents=True)
    result = examples.case_result_succeeded()
    result["metrics"] = metrics
    (directory / "result.json").write_text(json.dumps(result))
    if request is not None:
        (directory / "request.json").write_text(json.dumps(request))
    return directory


def test_latency_lower_is_better_and_throughput_higher() -> None:
    assert metric_delta("p50_ttft_ms", 10.0, 12.0).better == "a"
    assert metric_delta("request_throughput", 10.0, 12.0).better == "b"
    assert metric_delta("goodput", 3.0, 2.0).better == "a"
    same = metric_delta("p99_tpot_ms", 5.0, 5.0)
    assert same.better == "same" and same.relative == 0.0
    assert metric_delta("mean_ttft_ms", 0.0, 1.0).relative is None
    assert metric_delta("mean_ttft_ms", 8.0, 10.0).relative == pytest.approx(0.25)


def test_compare_reports_deltas_population_and_setup(tmp_path: Path) -> None:
    request_a = examples.case_request({"kind": "concurrency_limited", "concurrency": 1})
    request_b = examples.case_request({"kind": "concurrency_limited", "concurrency": 4})
    request_b["artifact_dir"] = "/elsewhere"
    a = load_case(
        save_case(tmp_path / "a", {"p50_ttft_ms": 10.0, "request_throughput": 1.0}, request_a)
    )
    b = load_case(
        save_case(tmp_path / "b", {"p50_ttft_ms": 20.0, "output_throughput": 9.0}, request_b)
    )
    comparison = compare_cases(a, b)
    assert [row.name for row in comparison.rows] == ["p50_ttft_ms"]
    assert comparison.rows[0].delta == 10.0
    assert comparison.only_in_a == ("request_throughput",)
    assert comparison.only_in_b == ("output_throughput",)
    assert comparison.same_population is True
    assert comparison.setup_differences == ("case.load_shape.concurrency: 1 -> 4",)


def test_compare_without_requests_says_unknown(tmp_path: Path) -> None:
    a = load_case(save_case(tmp_path / "a", {"x": 1.0}, None))
    b = load_case(save_case(tmp_path / "b", {"x": 1.0}, None))
    comparison = compare_cases(a, b)
    assert comparison.same_population is None and comparison.setup_differences is None


def test_diff_paths_finds_nested_changes_and_ignores_locations() -> None:
    left = {"a": {"b": 1, "artifact_dir": "/x"}, "c": [1, 2]}
    right = {"a": {"b": 2, "artifact_dir": "/y"}, "c": [1, 2], "d": True}
    assert diff_paths(left, right) == ["a.b: 1 -> 2", "d: None -> True"]


def test_find_cases_lists_subdirectories_in_order(tmp_path: Path) -> None:
    for name in ("c16", "c01", "c04"):
        save_case(tmp_path / name, {"x": 1.0}, None)
    assert [c.label for c in find_cases(tmp_path)] == ["c01", "c04", "c16"]


def test_missing_result_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RequestError, match="cannot read saved result"):
        load_case(tmp_path)


def save_trials(root: Path, throughputs: list[float], *, failed: int = 0) -> Path:
    """A ``run --trials`` folder: trial-NN cases and trials.json listing the succeeded ones."""
    names = [f"trial-{i:02d}" for i in range(1, len(throughputs) + 1)]
    for name, value in zip(names, throughputs, strict=True):
        save_case(root / name, {"request_throughput": value, "p50_ttft_ms": 10.0}, None)
    listing = {"schema_version": 1, "trials": names, "succeeded": names[failed:]}
    (root / "trials.json").write_text(json.dumps(listing))
    return root


def test_trials_make_compare_judge_the_noise(tmp_path: Path) -> None:
    a = load_trials(save_trials(tmp_path / "a", [10.0, 10.2, 9.9, 10.1]))
    far = load_trials(save_trials(tmp_path / "far", [12.0, 12.1, 11.9, 12.2]))
    near = load_trials(save_trials(tmp_path / "near", [10.1, 9.8, 10.2, 10.0]))
    beyond = compare_trial_sets(a, far)
    assert beyond.trials == (4, 4)
    noise = beyond.noise_of("request_throughput")
    assert noise is not None and noise.noise == "beyond_noise" and noise.p_value < 0.01
    row = next(r for r in beyond.rows if r.name == "request_throughput")
    assert row.a == pytest.approx(10.05) and row.b == pytest.approx(12.05)  # means
    within = compare_trial_sets(a, near).noise_of("request_throughput")
    assert within is not None and within.noise == "within_noise"
    # Identical constant values on both sides: no difference, within noise.
    constant = compare_trial_sets(a, near).noise_of("p50_ttft_ms")
    assert constant is not None and constant.noise == "within_noise"
    as_json = compare_trial_sets(a, far).as_json()
    assert {n["metric"] for n in as_json["noise"]} == {"request_throughput", "p50_ttft_ms"}
    assert as_json["trials"] == (4, 4) and as_json["rows"][0]["name"] == "p50_ttft_ms"


def test_single_cases_leave_the_noise_unjudged(tmp_path: Path) -> None:
    one = load_trials(save_case(tmp_path / "one", {"request_throughput": 1.0}, None))
    two = load_trials(save_case(tmp_path / "two", {"request_throughput": 2.0}, None))
    assert len(one) == 1
    comparison = compare_trial_sets(one, two)
    assert comparison.noise == () and comparison.trials == (1, 1)


def test_trials_listing_skips_failed_trials_and_needs_one(tmp_path: Path) -> None:
    assert len(load_trials(save_trials(tmp_path / "some", [1.0, 2.0, 3.0], failed=1))) == 2
    with pytest.raises(RequestError, match="no succeeded trials"):
        load_trials(save_trials(tmp_path / "none", [1.0], failed=1))


def test_a_side_whose_validity_failed_says_so_beside_its_numbers(tmp_path: Path) -> None:
    from rich.console import Console

    from inferlab_bench.report.tables import comparison_table

    a = save_case(tmp_path / "a", {"p50_ttft_ms": 40.0}, None)
    b = save_case(tmp_path / "b", {"p50_ttft_ms": 41.0}, None)
    (a / "validity.json").write_text(json.dumps({"verdict": "pass", "verdicts": {}}))
    (b / "validity.json").write_text(
        json.dumps(
            {"verdict": "fail", "verdicts": {"client_cost_low": "fail", "cache_cold": "pass"}}
        )
    )
    comparison = compare_cases(load_case(a), load_case(b))
    assert comparison.validity == ("pass", "fail: client_cost_low")
    console = Console(width=160, record=True)
    console.print(comparison_table(comparison, "a", "b"))
    assert "validity of B: fail: client_cost_low" in console.export_text()


def test_two_values_near_zero_are_printed_with_the_digits_that_tell_them_apart(
    tmp_path: Path,
) -> None:
    """Never '0.000 vs 0.000, +13.5%'."""
    from rich.console import Console

    from inferlab_bench.report.compare import pair_digits
    from inferlab_bench.report.tables import comparison_table

    assert pair_digits(0.0002, 0.000227) == 5
    assert pair_digits(40.0, 41.0) == 3 and pair_digits(5.0, 5.0) == 3
    a = load_trials(save_trials(tmp_path / "a", [10.0, 10.2, 9.9]))
    b = load_trials(save_trials(tmp_path / "b", [10.1, 10.0, 10.2]))
    for side, ratio in ((a, 0.000200), (b, 0.000227)):
        for case in side:
            case.result.metrics["prompt_cache_read_ratio"] = ratio
    console = Console(width=200, record=True)
    console.print(comparison_table(compare_trial_sets(a, b), "a", "b"))
    line = next(x for x in console.export_text().splitlines() if "prompt_cache_read_ratio" in x)
    assert "0.00020" in line and "0.00023" in line and "within noise (both ~0)" in line

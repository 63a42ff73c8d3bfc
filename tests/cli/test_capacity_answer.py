"""The capacity answer table says what is missing and why, never ``None`` or ``- req/s``."""

from __future__ import annotations

from inferlab_bench.cli import capacity


def test_a_planner_that_had_not_converged_says_so() -> None:
    shown = capacity._planner({"planner": "smooth_isotonic", "convergence_reason": None})
    assert shown == "smooth_isotonic (it had not converged when the search stopped)"
    reason = {"planner": "smooth_isotonic", "convergence_reason": "smooth_isotonic_bracket"}
    assert capacity._planner(reason) == "smooth_isotonic (smooth_isotonic_bracket)"


def test_no_goodput_without_a_capacity_says_why() -> None:
    assert capacity._per_second(None, "below_range") == "none (below_range: no load is claimed)"
    assert capacity._per_second(3.25, "found") == "3.250 req/s"

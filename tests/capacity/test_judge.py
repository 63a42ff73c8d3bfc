"""A probe's judgement: validity before the SLO, failed requests over every bound, and the
figures given to AIPerf's planner agreeing with our own verdict."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from inferlab_bench.capacity.judge import judge, nearest_rank, planner_metrics
from inferlab_bench.capacity.spec import Criterion
from inferlab_bench.protocol import BenchRequestSloInput
from inferlab_bench.validity.certify import bound_claim
from tests.capacity.support import VALID, figures

SLO = BenchRequestSloInput(ttft_ms=200.0, minimum_good_request_ratio=0.9)
P90 = Criterion(kind="percentile", value=90)
A90 = Criterion(kind="attainment", value=0.9)


@pytest.mark.parametrize("over", range(0, 8))
def test_nearest_rank_agrees_with_validitys_share_rule(over: int) -> None:
    """20 requests, ``over`` of them above the bound: our value <= bound exactly when
    validity's bound claim says the share holds (p90: at most 2 of 20 over)."""
    values = np.array([100.0] * (20 - over) + [300.0] * over)
    claim = bound_claim(values, "ttft_ms", 200.0, 90.0)
    assert (nearest_rank(values, 0.9) <= 200.0) == claim.met_by_share == (over <= 2)


def test_a_failed_request_counts_over_the_bound() -> None:
    failed = [False] * 18 + [True] * 2
    ok = judge(figures([50.0] * 20, failed=failed), SLO, P90)
    assert ok.metrics[0].over == 2 and ok.slo_met  # 2 of 20 over: p90 holds
    failed = [False] * 17 + [True] * 3
    missed = judge(figures([50.0] * 20, failed=failed), SLO, P90)
    assert missed.metrics[0].value is None  # the p90 request is a failed one
    assert missed.slo_met is False


def test_attainment_is_the_joint_good_share() -> None:
    values = [100.0] * 17 + [300.0] * 3
    assert judge(figures(values), SLO, A90).slo_met is False  # 17/20 = 0.85 < 0.9
    assert judge(figures([100.0] * 18 + [300.0] * 2), SLO, A90).slo_met is True  # 18/20


@pytest.mark.parametrize(
    ("verdict", "client"),
    [
        ("load_generator_kept_up", True),
        ("prompt_tokens_reconciled", False),
        ("output_lengths_honored", False),
        ("cache_cold", False),
    ],
)
def test_a_failed_validity_verdict_makes_the_probe_say_nothing(verdict: str, client: bool) -> None:
    judged = judge(figures([100.0] * 20, verdicts={**VALID, verdict: "fail"}), SLO, A90)
    assert not judged.valid and judged.slo_met is None
    assert judged.invalid_reason is not None and verdict in judged.invalid_reason
    assert judged.client_limited is client


def test_failed_requests_alone_do_not_invalidate_the_probe() -> None:
    """Requests the server failed are a measurement (over every bound), not a client fault."""
    verdicts = {**VALID, "requests_succeeded": "fail"}
    judged = judge(figures([100.0] * 20, verdicts=verdicts, failed=[True] * 20), SLO, A90)
    assert judged.valid and judged.slo_met is False


def test_a_failed_case_is_invalid_with_its_error() -> None:
    judged = judge(figures([100.0] * 4, status="failed"), SLO, A90)
    assert not judged.valid and "AIPerf exited" in (judged.invalid_reason or "")
    assert judged.validity == "fail"


def test_the_probe_shows_the_cases_own_verdict_where_its_number_is() -> None:
    """The probe table said 'validity pass' for c=16 where `report` on the same folder said
    fail (client_cost_low, which does not stop a probe from counting): both now read it."""
    verdicts = {**VALID, "client_cost_low": "fail"}
    fig = dataclasses.replace(figures([100.0] * 20, verdicts=verdicts), verdict="fail")
    judged = judge(fig, SLO, A90)
    assert judged.valid and judged.slo_met is True  # counted: the server was measured
    assert judged.validity == "fail" and judged.failed_verdicts == ("client_cost_low",)
    clean = judge(dataclasses.replace(figures([100.0] * 20), verdict="pass"), SLO, A90)
    assert clean.validity == "pass" and clean.failed_verdicts == ()


def test_the_planner_reads_what_we_judged() -> None:
    values = [100.0] * 17 + [300.0] * 3
    p90 = planner_metrics(judge(figures(values), SLO, P90), P90)
    assert p90["time_to_first_token"] == {"p90": 300.0}
    a90 = planner_metrics(judge(figures(values), SLO, A90), A90)
    assert a90["good_request_fraction"] == {"avg": 0.85}

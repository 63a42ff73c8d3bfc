"""The answer from counted probes: the bracket, the first metric to breach, what is claimed."""

from __future__ import annotations

from pathlib import Path

from inferlab_bench.capacity.answer import PlannerFacts, Probe, Status, answer, first_breach
from inferlab_bench.capacity.judge import MetricFigure, ProbeJudgement

FACTS = PlannerFacts("smooth_isotonic", "smooth_isotonic_precision_reached", None)


def metric(name: str, value: float | None, bound: float) -> MetricFigure:
    met = value is not None and value <= bound
    return MetricFigure(name, bound, 20, 0 if met else 5, value, met, True)


def probe(number: int, load: float, *metrics: MetricFigure, counted: bool = True) -> Probe:
    met = all(m.met for m in metrics)
    judgement = ProbeJudgement(
        valid=counted,
        invalid_reason=None if counted else "validity failed: load_generator_kept_up",
        client_limited=not counted,
        slo_met=met if counted else None,
        metrics=metrics,
        attainment=1.0 if met else 0.5,
        goodput=float(load),
        request_throughput=float(load),
    )
    return Probe(
        number, load, f"c={load:g}", Path(f"/x/{number}"), judgement, number if counted else None
    )


def test_the_first_metric_to_breach_is_the_one_that_broke_at_the_lowest_load() -> None:
    probes = [
        probe(1, 4, metric("ttft_ms", 100, 200), metric("tpot_ms", 20, 50)),
        probe(2, 8, metric("ttft_ms", 150, 200), metric("tpot_ms", 60, 50)),
        probe(3, 16, metric("ttft_ms", 900, 200), metric("tpot_ms", 90, 50)),
    ]
    assert first_breach(probes)[0] == "tpot_ms"
    found = answer(probes, FACTS, stopped_at=None, labels={})
    assert found.status is Status.FOUND
    assert (found.capacity, found.lowest_failing, found.interval) == (4, 8, (4, 8))
    assert found.goodput_at_capacity == 4.0 and found.certified_at_capacity is True
    assert found.confidence["relative_bracket_width"] == 0.5


def test_an_uncounted_probe_decides_nothing() -> None:
    probes = [
        probe(1, 4, metric("ttft_ms", 100, 200)),
        probe(2, 8, metric("ttft_ms", 900, 200), counted=False),
    ]
    result = answer(probes, FACTS, stopped_at=probes[1], labels={8: "c=8"})
    assert result.status is Status.CLIENT_LIMITED
    assert result.capacity is None and result.lowest_failing is None
    assert result.highest_valid_pass == 4 and result.stopped_at_load == 8
    assert "c=8" in result.message and "--engine kube" in result.message


def test_a_pass_above_a_failure_is_not_the_capacity() -> None:
    """Non-monotonic evidence: the capacity stays below the lowest failing load."""
    probes = [
        probe(1, 4, metric("ttft_ms", 100, 200)),
        probe(2, 8, metric("ttft_ms", 900, 200)),
        probe(3, 12, metric("ttft_ms", 100, 200)),
    ]
    result = answer(probes, FACTS, stopped_at=None, labels={})
    assert (result.capacity, result.lowest_failing) == (4, 8)

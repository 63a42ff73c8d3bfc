"""Per-request decisions: output length, finish reason, seeded faults."""

from __future__ import annotations

from inferlab_bench.simulator import FaultConfig
from inferlab_bench.simulator.plan import Sampling, make_plan, output_length, request_rng


def test_ignore_eos_is_exactly_max_tokens() -> None:
    rng = request_rng(0, 0)
    assert output_length(Sampling(17, None, True), 256, rng) == 17
    assert output_length(Sampling(None, None, True), 100, rng) == 100


def test_drawn_length_respects_min_and_max() -> None:
    for i in range(100):
        n = output_length(Sampling(10, 7, False), 256, request_rng(5, i))
        assert 7 <= n <= 10


def test_plans_are_reproducible_per_seed_and_index() -> None:
    faults = FaultConfig(error_rate=0.5, drop_rate=0.5)
    s = Sampling(50, 1, False)
    assert make_plan(s, 256, faults, request_rng(1, 3)) == make_plan(
        s, 256, faults, request_rng(1, 3)
    )
    plans = [make_plan(s, 256, faults, request_rng(1, i)) for i in range(200)]
    errors = sum(p.error_status is not None for p in plans)
    assert 60 < errors < 140


def test_fault_names_and_finish_reason() -> None:
    faults = FaultConfig(
        error_rate=1,
        error_status=429,
        stall_rate=1,
        stall_seconds=2,
        prompt_tokens_offset=3,
        ignore_min_tokens=True,
    )
    plan = make_plan(Sampling(8, 8, True), 256, faults, request_rng(0, 0))
    assert plan.fault == "error_429+stall+prompt_tokens_offset+ignore_min_tokens"
    assert plan.output_tokens == 4 and plan.finish_reason == "stop"
    clean = make_plan(Sampling(8, None, True), 256, FaultConfig(), request_rng(0, 0))
    assert clean.fault is None and clean.finish_reason == "length"

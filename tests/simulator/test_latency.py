"""The pure latency model: formulas, slots and FIFO queueing, seeded jitter."""

from __future__ import annotations

import pytest

from inferlab_bench.simulator import LatencyConfig
from inferlab_bench.simulator.latency import Engine, inter_token_seconds, prefill_seconds


def test_prefill_formula() -> None:
    lat = LatencyConfig(prefill_base_ms=5, prefill_ms_per_token=0.05)
    assert prefill_seconds(lat, 0) == pytest.approx(0.005)
    assert prefill_seconds(lat, 1000) == pytest.approx(0.055)


def test_inter_token_grows_with_running_sequences() -> None:
    lat = LatencyConfig(decode_base_ms=8, decode_ms_per_seq=0.2)
    assert inter_token_seconds(lat, 1) == pytest.approx(0.0082)
    assert inter_token_seconds(lat, 64) == pytest.approx(0.0208)


def test_engine_uses_the_running_count() -> None:
    engine = Engine(LatencyConfig(decode_base_ms=8, decode_ms_per_seq=1))
    for seq in range(3):
        assert engine.arrive(seq)
    assert engine.inter_token_seconds() == pytest.approx(0.011)
    engine.finish(0)
    assert engine.inter_token_seconds() == pytest.approx(0.010)


def test_max_num_seqs_queues_fifo() -> None:
    engine = Engine(LatencyConfig(max_num_seqs=2))
    assert engine.arrive(1) and engine.arrive(2)
    assert not engine.arrive(3) and not engine.arrive(4)
    assert (engine.running, engine.waiting) == (2, 2)
    assert engine.finish(2) == [3]
    assert engine.finish(1) == [4]
    assert (engine.running, engine.waiting) == (2, 0)


def test_a_queued_sequence_can_leave_the_queue() -> None:
    engine = Engine(LatencyConfig(max_num_seqs=1))
    engine.arrive(1)
    engine.arrive(2)
    engine.arrive(3)
    assert engine.finish(2) == []  # gave up while waiting
    assert engine.finish(1) == [3]


def test_newcomer_does_not_overtake_the_queue() -> None:
    engine = Engine(LatencyConfig(max_num_seqs=1))
    engine.arrive(1)
    engine.arrive(2)
    engine._running.clear()  # a slot is free but 2 still waits: 3 must queue behind it
    assert not engine.arrive(3)


def test_jitter_is_seeded_and_bounded() -> None:
    lat = LatencyConfig(decode_base_ms=10, decode_ms_per_seq=0, jitter=0.2)

    def draws(seed: int) -> list[float]:
        engine = Engine(lat, seed)
        engine.arrive(0)
        return [engine.inter_token_seconds() for _ in range(200)]

    assert draws(1) == draws(1) != draws(2)
    assert all(0.008 <= d <= 0.012 for d in draws(1))


def test_zero_latency() -> None:
    lat = LatencyConfig.zero()
    assert lat.is_zero and not LatencyConfig().is_zero
    engine = Engine(lat)
    engine.arrive(0)
    assert engine.prefill_seconds(10_000) == 0 == engine.inter_token_seconds()

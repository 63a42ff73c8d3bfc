"""The load shape's facts, decided once: AIPerf's phase, in-flight cap, first wave, labels."""

from __future__ import annotations

import pytest

from inferlab_bench.errors import ConfigurationError
from inferlab_bench.load import Load, LoadKind
from inferlab_bench.protocol import ConcurrencyLimited, RequestRateLimited, UnboundedRequestRate

SHAPES = [
    ConcurrencyLimited(kind="concurrency_limited", concurrency=8),
    RequestRateLimited(kind="request_rate_limited", request_rate=2.5, burstiness=None),
    RequestRateLimited(kind="request_rate_limited", request_rate=4.0, burstiness=0.25),
    UnboundedRequestRate(kind="unbounded_request_rate"),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.kind)
def test_the_wire_value_round_trips(shape: object) -> None:
    assert Load.of(shape).wire() == shape  # type: ignore[arg-type]


def test_aiperf_phases() -> None:
    loads = [Load.of(s) for s in SHAPES]
    assert [load.aiperf_phase(20) for load in loads] == [
        {"type": "concurrency", "concurrency": 8, "requests": 20},
        {"type": "poisson", "rate": 2.5, "requests": 20},
        {"type": "gamma", "rate": 4.0, "smoothness": 0.25, "requests": 20},
        {"type": "concurrency", "concurrency": 20, "requests": 20},
    ]


def test_a_concurrency_above_the_request_count_is_capped_there() -> None:
    huge = Load.at_concurrency(2**32 - 1)
    assert huge.in_flight(4) == 4 and huge.first_wave(4) == 4
    assert huge.aiperf_phase(4)["concurrency"] == 4
    assert Load.at_rate(3.0).in_flight(4) is None and Load.at_rate(3.0).first_wave(4) == 4


def test_expected_dispersion_and_labels() -> None:
    assert Load.at_rate(1.0).expected_interarrival_cv == 1.0
    assert Load.at_rate(1.0, 0.25).expected_interarrival_cv == pytest.approx(2.0)
    assert Load.at_concurrency(4).expected_interarrival_cv is None
    assert [Load.of(s).label for s in SHAPES] == ["c=8", "2.5/s", "gamma(0.25) 4/s", "unbounded"]
    assert [Load.of(s).slug for s in SHAPES] == ["c8", "rate2.5", "rate4", "unbounded"]
    assert Load.unbounded().kind is LoadKind.UNBOUNDED and Load.unbounded().level is None


@pytest.mark.parametrize("load", [Load.at_rate(1.0), Load.unbounded()], ids=lambda x: x.slug)
def test_warmup_without_a_concurrency_is_refused_naming_the_field(load: Load) -> None:
    with pytest.raises(ConfigurationError, match="case.warmup_request_count: warmup needs a"):
        load.check(warmup=2)
    load.check(warmup=0)
    Load.at_concurrency(2).check(warmup=2)

"""The load a case asks for, as one typed value: every other module asks it, none re-switches.

The wire carries three shapes (``concurrency_limited``, ``request_rate_limited`` with an
optional gamma ``burstiness``, ``unbounded_request_rate``). What follows from each one (the
AIPerf phase, how many requests can be in flight, the expected inter-arrival dispersion,
whether warmup is allowed, the labels people read) is decided here once.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

from inferlab_bench.errors import ConfigurationError
from inferlab_bench.protocol import (
    BenchLoadInput,
    ConcurrencyLimited,
    RequestRateLimited,
    UnboundedRequestRate,
)


class LoadKind(enum.StrEnum):
    CONCURRENCY = "concurrency_limited"
    RATE = "request_rate_limited"
    UNBOUNDED = "unbounded_request_rate"


@dataclass(frozen=True)
class Load:
    """One load shape with its facts; build it with ``Load.of``."""

    kind: LoadKind
    concurrency: int | None = None
    """The asked concurrency (concurrency_limited only), as the request gives it."""
    rate: float | None = None
    """Requests per second (request_rate_limited only)."""
    burstiness: float | None = None
    """Gamma shape; None means poisson (request_rate_limited only)."""

    @classmethod
    def of(cls, shape: BenchLoadInput) -> Load:
        if isinstance(shape, ConcurrencyLimited):
            return cls(LoadKind.CONCURRENCY, concurrency=shape.concurrency)
        if isinstance(shape, RequestRateLimited):
            return cls(LoadKind.RATE, rate=shape.request_rate, burstiness=shape.burstiness)
        return cls(LoadKind.UNBOUNDED)

    @classmethod
    def at_concurrency(cls, concurrency: int) -> Load:
        return cls(LoadKind.CONCURRENCY, concurrency=concurrency)

    @classmethod
    def at_rate(cls, rate: float, burstiness: float | None = None) -> Load:
        return cls(LoadKind.RATE, rate=rate, burstiness=burstiness)

    @classmethod
    def unbounded(cls) -> Load:
        return cls(LoadKind.UNBOUNDED)

    def wire(self) -> BenchLoadInput:
        """The protocol value of this load."""
        if self.kind is LoadKind.CONCURRENCY:
            assert self.concurrency is not None
            return ConcurrencyLimited(kind="concurrency_limited", concurrency=self.concurrency)
        if self.kind is LoadKind.RATE:
            assert self.rate is not None
            return RequestRateLimited(
                kind="request_rate_limited", request_rate=self.rate, burstiness=self.burstiness
            )
        return UnboundedRequestRate(kind="unbounded_request_rate")

    @property
    def rate_limited(self) -> bool:
        return self.kind is LoadKind.RATE

    @property
    def allows_warmup(self) -> bool:
        """AIPerf's warmup phase runs at a concurrency: only a concurrency load has one."""
        return self.kind is LoadKind.CONCURRENCY

    def in_flight(self, requests: int) -> int | None:
        """The most requests that can be in flight at once (None: set by the rate, not a cap).

        A concurrency above the request count cannot be reached: it is capped there.
        """
        if self.kind is LoadKind.RATE:
            return None
        if self.kind is LoadKind.UNBOUNDED:
            return requests
        assert self.concurrency is not None
        return min(self.concurrency, requests)

    def first_wave(self, requests: int) -> int:
        """How many requests start before any can have finished: the in-flight cap, or every
        request of a rate load (each may arrive before the first one ends)."""
        cap = self.in_flight(requests)
        return requests if cap is None else cap

    @property
    def expected_interarrival_cv(self) -> float | None:
        """CV of the planned gaps: 1 for poisson, 1/sqrt(shape) for gamma; None: no schedule."""
        if self.kind is not LoadKind.RATE:
            return None
        return 1.0 if self.burstiness is None else 1.0 / math.sqrt(self.burstiness)

    def aiperf_phase(self, requests: int) -> dict[str, Any]:
        """The AIPerf phase block (type and its parameters) for ``requests`` requests."""
        if self.kind is LoadKind.RATE:
            if self.burstiness is None:
                return {"type": "poisson", "rate": self.rate, "requests": requests}
            return {
                "type": "gamma",
                "rate": self.rate,
                "smoothness": self.burstiness,
                "requests": requests,
            }
        cap = self.in_flight(requests)
        return {"type": "concurrency", "concurrency": cap, "requests": requests}

    def check(self, *, warmup: int) -> None:
        """Refuse what no run can do (the wire models already hold each value positive)."""
        if warmup and not self.allows_warmup:
            raise ConfigurationError(
                f"case.warmup_request_count: warmup needs a concurrency_limited load, "
                f"found {self.kind.value} with {warmup} warmup requests",
                hint="set warmup_request_count to 0 or use a concurrency_limited load shape",
            )

    @property
    def label(self) -> str:
        """For tables: ``c=8``, ``5/s``, ``gamma(0.5) 5/s``, ``unbounded``."""
        if self.kind is LoadKind.CONCURRENCY:
            return f"c={self.concurrency}"
        if self.kind is LoadKind.RATE:
            rate = f"{self.rate:g}/s"
            return rate if self.burstiness is None else f"gamma({self.burstiness:g}) {rate}"
        return "unbounded"

    @property
    def slug(self) -> str:
        """For folder names: ``c8``, ``rate5``, ``unbounded``."""
        if self.kind is LoadKind.CONCURRENCY:
            return f"c{self.concurrency}"
        if self.kind is LoadKind.RATE:
            return f"rate{self.rate:g}"
        return "unbounded"

    @property
    def level(self) -> float | None:
        """The swept quantity (concurrency or rate); None for unbounded."""
        if self.kind is LoadKind.CONCURRENCY:
            return float(self.concurrency or 0)
        return self.rate

    @property
    def axis(self) -> str:
        """What ``level`` measures, for a plot axis."""
        return "concurrency" if self.kind is LoadKind.CONCURRENCY else "request rate (req/s)"

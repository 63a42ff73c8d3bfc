"""The capacity search as data: which load axis, its range, the SLO criterion, the planner.

Also the JSON-mode request (``inferlab-capacity-request-v1``): protocol v6 has no capacity
message, so this is our own extension with its own schema name and version: a
``BenchClientRequest`` (the case every probe runs, its load shape replaced per probe) plus
this search block.
"""

from __future__ import annotations

import enum
import math
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from inferlab_bench.load import Load
from inferlab_bench.protocol import BenchClientRequest, BenchLoadInput

CAPACITY_REQUEST_SCHEMA: Literal["inferlab-capacity-request-v1"] = "inferlab-capacity-request-v1"
CAPACITY_SCHEMA: Literal["inferlab-capacity-v1"] = "inferlab-capacity-v1"
CAPACITY_SCHEMA_VERSION = 1
PERCENTILES = (50.0, 75.0, 90.0, 95.0, 99.0)
"""The percentiles AIPerf's SLA filters can name (its ``stat``)."""
RATE_STEP = 0.01
"""AIPerf's 1-D SLA planners search integers: a rate is searched in steps of 0.01 req/s."""


class Axis(enum.StrEnum):
    CONCURRENCY = "concurrency"
    RATE = "rate"


class PlannerName(enum.StrEnum):
    """AIPerf 0.13's search planners (their plugin names)."""

    SMOOTH_ISOTONIC = "smooth_isotonic"
    MONOTONIC = "monotonic_sla"
    BAYESIAN = "bayesian"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Criterion(_Strict):
    """When a probe meets the SLO: a share of requests meeting every bound at once
    (``attainment``), or every bound held at a latency percentile (``percentile``)."""

    kind: Literal["attainment", "percentile"]
    value: float = Field(gt=0.0, allow_inf_nan=False)
    """The attainment fraction (0, 1], or the percentile (one of ``PERCENTILES``)."""

    @model_validator(mode="after")
    def _range(self) -> Self:
        if self.kind == "attainment" and self.value > 1.0:
            raise ValueError("an attainment is a fraction in (0, 1], e.g. 0.95")
        if self.kind == "percentile" and self.value not in PERCENTILES:
            raise ValueError("a percentile is one of AIPerf's: p50, p75, p90, p95, p99")
        return self

    @property
    def ratio(self) -> float:
        """The share of requests that must meet the bound(s)."""
        return self.value if self.kind == "attainment" else self.value / 100.0

    @property
    def label(self) -> str:
        if self.kind == "attainment":
            return f"{self.value:.0%} of requests within every bound"
        return f"every bound at p{self.value:g}"


class SearchSpec(_Strict):
    """The search: the axis and its range, the criterion, the planner and its limits."""

    axis: Axis
    low: float = Field(gt=0.0, allow_inf_nan=False)
    high: float = Field(gt=0.0, allow_inf_nan=False)
    criterion: Criterion
    planner: PlannerName = PlannerName.SMOOTH_ISOTONIC
    max_probes: int = Field(default=20, ge=2, le=200)
    """Counted probes at most (AIPerf's ``max_iterations``)."""
    reruns: int = Field(default=1, ge=0, le=3)
    """Times an invalid probe is run again before the search stops."""
    burstiness: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.low >= self.high:
            raise ValueError(f"range {self.low:g}:{self.high:g}: low must be below high")
        if self.axis is Axis.CONCURRENCY:
            if self.low != int(self.low) or self.high != int(self.high):
                raise ValueError("a concurrency range takes whole numbers, e.g. 1:256")
            if self.burstiness is not None:
                raise ValueError("burstiness shapes request-rate arrivals only")
        elif self.low < RATE_STEP:
            raise ValueError(f"a rate range starts at {RATE_STEP} req/s or above")
        return self

    @property
    def index_low(self) -> int:
        return self.index(self.low)

    @property
    def index_high(self) -> int:
        return self.index(self.high)

    def index(self, load: float) -> int:
        """The planner's integer for a load (a concurrency, or a rate in RATE_STEP units)."""
        if self.axis is Axis.CONCURRENCY:
            return int(load)
        return int(math.floor(load / RATE_STEP + 1e-9))

    def load(self, index: int) -> float:
        """The load of the planner's integer."""
        if self.axis is Axis.CONCURRENCY:
            return float(index)
        return round(index * RATE_STEP, 6)

    def shape(self, index: int) -> BenchLoadInput:
        """The case's load shape at the planner's integer."""
        if self.axis is Axis.CONCURRENCY:
            return Load.at_concurrency(index).wire()
        return Load.at_rate(self.load(index), self.burstiness).wire()

    def label(self, load: float | None) -> str:
        if load is None:
            return "-"
        return f"c={load:g}" if self.axis is Axis.CONCURRENCY else f"{load:g}/s"


class CapacityRequest(_Strict):
    """JSON mode: the case every probe runs plus the search (``docs/capacity.md``)."""

    schema_name: Literal["inferlab-capacity-request-v1"] = CAPACITY_REQUEST_SCHEMA
    schema_version: Literal[1] = 1
    case: BenchClientRequest
    """Every probe's case; its load shape is replaced, its ``artifact_dir`` holds the search."""
    search: SearchSpec
    prefix_cache_reset: str | None = None
    """As ``case --prefix-cache-reset`` (vllm, sglang, METHOD:/path ...)."""
    connections: str | None = None
    """As ``case --connections`` (auto, pooled, close)."""

    @model_validator(mode="after")
    def _case_fits(self) -> Self:
        case = self.case
        if case.definition.request_slo is None:
            raise ValueError("case.definition.request_slo: a capacity search needs an SLO")
        if self.search.axis is Axis.RATE and case.case.warmup_request_count:
            raise ValueError("case.warmup_request_count: warmup runs at a concurrency only")
        if self.search.axis is Axis.CONCURRENCY and self.search.high > case.case.request_count:
            raise ValueError("search.high: a concurrency above case.request_count is never reached")
        return self


class CapacityResult(_Strict):
    """JSON mode's result: always written; ``capacity`` is the ``capacity.json`` document."""

    schema_name: Literal["inferlab-capacity-v1"] = CAPACITY_SCHEMA
    schema_version: Literal[1] = 1
    status: Literal["succeeded", "failed"]
    error: str | None = None
    capacity_file: str | None = None
    capacity: dict[str, Any] | None = None

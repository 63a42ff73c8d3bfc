"""Every validity check of one case over plain columns, assembled into one document."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferlab_bench.load import Load
from inferlab_bench.protocol import BenchLoadInput, BenchRequestSloInput
from inferlab_bench.validity.cache import ColdStart, assess_cache, cold_start
from inferlab_bench.validity.certify import BoundClaim, MetricCertification, bound_claim, certify
from inferlab_bench.validity.client_cost import (
    ClientCostTolerances,
    ClientUsage,
    assess_client_cost,
)
from inferlab_bench.validity.digests import sequence_digest
from inferlab_bench.validity.dispatch import DispatchTolerances, assess_dispatch
from inferlab_bench.validity.failures import assess_failures
from inferlab_bench.validity.goodput import token_goodput
from inferlab_bench.validity.inputs import Expectations, PhaseRecords
from inferlab_bench.validity.measured import decide, measure
from inferlab_bench.validity.report import ValidityDocument, build_document
from inferlab_bench.validity.schedule import PlannedSchedule, scheduled_latency
from inferlab_bench.validity.steady import steady_state
from inferlab_bench.validity.tokens import (
    TokenTolerance,
    reconcile_output_tokens,
    reconcile_prompt_tokens,
)


@dataclass(frozen=True)
class Tolerances:
    """Every tolerance in one place, so a caller can loosen them for a noisy machine."""

    dispatch: DispatchTolerances = DispatchTolerances()
    prompt_tokens: TokenTolerance = TokenTolerance(rel=0.0)
    output_tokens: TokenTolerance = TokenTolerance(rel=0.0)
    client_cost: ClientCostTolerances = ClientCostTolerances()


DEFAULT_TOLERANCES = Tolerances()


@dataclass(frozen=True)
class CaseFacts:
    """What the case asked for, besides the records: load, reset, expected tokens, digest."""

    load: BenchLoadInput
    expectations: Expectations | None = None
    population_sha256: str | None = None
    reset_requested: bool = False
    prefix_bounds: tuple[int, ...] | None = None
    """Per first-wave request (in ``cache.first_wave`` order), the tokens its prompt shares
    with an earlier one: what it may find cached after a reset. None: prompts unknown."""
    slo: BenchRequestSloInput | None = None
    """The request's SLO: each bound is certified at its good-request ratio."""
    schedule: PlannedSchedule | None = None
    """The rate loop's plan (our AIPerf plugin's record): when each request was due."""
    client_usage: ClientUsage | None = None
    """The client's CPU time and the host's run queue during the run; None: not sampled, and
    then the document has no ``client_cost_low`` verdict."""
    server_truth: tuple[Mapping[str, Any], ...] | None = None
    """Our simulator's records of these requests (None: not our simulator, or not asked):
    with them ``client_cost_low``, ``load_generator_kept_up`` and ``cache_cold`` are decided
    by what the server measured (``measured``)."""


def assess(
    profiling: PhaseRecords,
    warmup: PhaseRecords | None,
    facts: CaseFacts,
    tolerances: Tolerances = DEFAULT_TOLERANCES,
) -> ValidityDocument:
    """Run every check on the profiling phase (warmup adds its cache ratio and digest)."""
    expected = facts.expectations
    sequences = [sequence_digest("profiling", profiling)]
    if warmup is not None and len(warmup):
        sequences.insert(0, sequence_digest("warmup", warmup))
    dispatch = assess_dispatch(profiling, facts.load, tolerances.dispatch)
    cache = assess_cache(profiling, warmup, facts.reset_requested, _cold_start(profiling, facts))
    client_cost = (
        None
        if facts.client_usage is None
        else assess_client_cost(profiling, facts.client_usage, tolerances.client_cost)
    )
    measured = None
    if facts.server_truth is not None:
        wave = Load.of(facts.load).first_wave(len(profiling)) if facts.reset_requested else None
        at_write = facts.client_usage is not None and facts.client_usage.start_at_first_byte
        measured = measure(profiling, facts.server_truth, wave, from_client_start=at_write)
    if measured is not None and facts.server_truth is not None:
        dispatch, client_cost, cache, measured = decide(
            measured,
            profiling,
            facts.server_truth,
            dispatch,
            client_cost,
            cache,
            warmup,
            lambda records: _cold_start(records, facts),
        )
    return build_document(
        dispatch=dispatch,
        prompt_tokens=reconcile_prompt_tokens(
            profiling, expected.input_tokens if expected else None, tolerances.prompt_tokens
        ),
        output_tokens=reconcile_output_tokens(
            profiling, expected.output_tokens if expected else None, tolerances.output_tokens
        ),
        cache=cache,
        goodput=token_goodput(profiling),
        failures=assess_failures(profiling),
        population_sha256=facts.population_sha256,
        sequences=sequences,
        certification=certify_latencies(profiling),
        slo_bounds=certify_slo(profiling, facts.slo),
        scheduled_latency=scheduled_latency(profiling, facts.load, facts.schedule),
        steady_state=steady_state(profiling),
        client_cost=client_cost,
        measured=measured,
    )


def certify_slo(
    profiling: PhaseRecords, slo: BenchRequestSloInput | None
) -> tuple[BoundClaim, ...]:
    """Each SLO bound at the percentile its good-request ratio asks, over every request."""
    if slo is None:
        return ()
    columns = {
        "ttft_ms": profiling.ttft_ms,
        "tpot_ms": profiling.itl_ms,
        "request_latency_ms": profiling.latency_ms,
    }
    percentile = 100.0 * slo.minimum_good_request_ratio
    claims = []
    for metric, values in columns.items():
        bound = getattr(slo, metric)
        if bound is None or values is None or not 0.0 < percentile < 100.0:
            continue
        # A failed request did not meet the bound, whatever it measured.
        judged = np.where(profiling.succeeded, values, np.nan)
        claims.append(bound_claim(judged, metric, bound, percentile))
    return tuple(claims)


def certify_latencies(profiling: PhaseRecords) -> tuple[MetricCertification, ...]:
    """What the succeeded requests' TTFT, TPOT and E2E percentiles can claim."""
    columns = {
        "ttft_ms": profiling.ttft_ms,
        "tpot_ms": profiling.itl_ms,
        "request_latency_ms": profiling.latency_ms,
    }
    return tuple(
        certify(values[profiling.succeeded], metric)
        for metric, values in columns.items()
        if values is not None
    )


def _cold_start(profiling: PhaseRecords, facts: CaseFacts) -> ColdStart | None:
    if not facts.reset_requested:
        return None
    size = Load.of(facts.load).first_wave(len(profiling))
    return cold_start(profiling, size, facts.prefix_bounds)

"""Before a run starts: whether its request count can support what it will report.

A run too short for its own SLO cannot certify it however fast the server is, and a
concurrency run whose slots each complete only a few requests is mostly ramp and drain.
Both are said before any request is sent, with the count that would suffice; ``--strict``
refuses such a run.
"""

from __future__ import annotations

from collections.abc import Sequence

from inferlab_bench.load import Load, LoadKind
from inferlab_bench.protocol import BenchClientRequest, BenchLoadInput
from inferlab_bench.validity.certify import samples_for_bound

REQUESTS_PER_SLOT = 5
"""Fewer completions per concurrency slot than this is a run of ramp-up and drain."""


def run_size_advice(request: BenchClientRequest, loads: Sequence[BenchLoadInput] = ()) -> list[str]:
    """One sentence per problem with ``--requests`` for this case (and a sweep's loads)."""
    requests = request.case.request_count
    advice = []
    slo = request.definition.request_slo
    if slo is not None:
        percentile = 100.0 * slo.minimum_good_request_ratio
        if 0.0 < percentile < 100.0:
            needed = samples_for_bound(0, percentile)
            if requests < needed:
                advice.append(
                    f"--requests {requests} cannot certify the SLO at p{percentile:g} even if "
                    f"every request meets it: that needs at least {needed} (MLPerf's "
                    "early-stopping rule, 99% confidence)"
                )
    shapes = [Load.of(shape) for shape in (loads or [request.case.load_shape])]
    # An unbounded load sends every request at once by design: it has no slots to fill.
    concurrencies = [s.in_flight(requests) for s in shapes if s.kind is LoadKind.CONCURRENCY]
    widest = max((c for c in concurrencies if c is not None), default=None)
    if widest is not None and widest > 1 and requests < REQUESTS_PER_SLOT * widest:
        advice.append(
            f"--requests {requests} is below {REQUESTS_PER_SLOT}x the concurrency {widest}: "
            f"each slot completes about {requests / widest:.1f} requests, mostly ramp-up and "
            f"drain; {REQUESTS_PER_SLOT * widest} or more measure a steady load"
        )
    return advice

"""Verdicts decided by the server's truth when it is at hand, the proxies kept as figures.

Against our simulator the case stage has the server's own record of every request it sent
(``case.server_truth``, joined by X-Request-ID). Then three verdicts are decided by what the
truth measured, not by the proxies calibrated to stand in for it (docs/calibration.md):

- ``client_cost_low``: the client-added latency (client minus server, same requests) of
  TTFT and E2E at p50 and p90 at most max(3 ms, 5%), ITL at most max(0.5 ms, 5%)
  (``truth.CLIENT_TOLERANCE``); CPU per request, send time, the first token read late and
  the run queue stay as figures in its sentence. Where the client's start is its first
  byte written (our transport, every pooled run) the server's figures are taken from that
  start, not from the simulator's own arrival stamp: the way back is measured on one clock
  (the simulator stamps each write), the way out is not, and the simulator's wait to parse
  a request on a busy host is its own. Against the wire (docs/calibration.md) the arrival
  stamp put 2-4 ms of that wait on the client under a CPU hog (3 false alarms in 33 runs);
  from the start, 0 in 33;
- ``load_generator_kept_up``: the arrival lateness (server arrival minus AIPerf's credit
  issue, the moment it decided to send) at most ``ARRIVAL_LATE_P95_MS`` at p95, in place of
  the client's own estimate (request start minus credit issue); the rate, its dispersion and
  the concurrency held are judged as before;
- ``cache_cold``: the first wave judged by the cached tokens the server says it found.

What the calibrated rules said is kept (``Measured.by_proxies``, ``proxy_checks``): the
calibration scores them, and a reader sees where the proxies and the truth disagree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from inferlab_bench.validity.cache import CacheColdness, ColdStart, assess_cache
from inferlab_bench.validity.client_cost import ClientCost
from inferlab_bench.validity.dispatch import DispatchFidelity
from inferlab_bench.validity.distribution import Distribution, describe
from inferlab_bench.validity.inputs import PhaseRecords
from inferlab_bench.validity.truth import (
    CLIENT_TOLERANCE,
    NS_PER_MS,
    ClientDistortion,
    ClientTolerance,
    TruthRow,
    client_distortion,
    server_latencies_ns,
)
from inferlab_bench.validity.verdict import (
    Check,
    Figures,
    Verdict,
    at_most,
    combine_checks,
    unknown,
)

ARRIVAL_LATE_P95_MS = 50.0
"""load_generator_kept_up: requests reach the server within 50 ms of AIPerf's decision to send
them, at p95 (the bound the dispatch delay, its client-side estimate, was held to)."""
SOURCE = "the simulator's ground truth of these requests (joined by X-Request-ID)"


class Measured(Figures):
    """What the server's truth measured of this case's requests (validity.json ``measured``)."""

    source: str = SOURCE
    requests: int
    """Profiling requests joined to a server record (succeeded ones for the latencies)."""
    client_added_ms: dict[str, float | None]
    """``ttft_p50`` ... ``e2e_p90``: the client's percentile minus the server's, ms."""
    client_allowed_ms: dict[str, float]
    """The tolerance of each: max(3 ms, 5%) for TTFT and E2E, max(0.5 ms, 5%) for ITL."""
    client_beyond_tolerance: bool
    measured_from: str = "server_arrival"
    """Where the server's TTFT and E2E start: ``client_start`` (the client's first byte
    written) or ``server_arrival`` (the simulator's parse of the request)."""
    arrival_late_ms: Distribution | None
    """Server arrival minus AIPerf's credit issue per request (None: no credit times)."""
    arrival_late_bound_ms: float = ARRIVAL_LATE_P95_MS
    first_wave_cached_tokens: int | None = None
    """Cached prompt tokens the server found for the first wave after a reset (None: no
    reset asked)."""
    by_proxies: dict[str, Verdict] = {}
    """The verdicts the calibrated rules gave (what a run against another server gets)."""
    proxy_checks: tuple[Check, ...] = ()
    """Their checks, kept as figures."""


def join(profiling: PhaseRecords, server: Sequence[Mapping[str, Any]]) -> list[int | None]:
    """Per profiling record, the index of its server record (None: not found)."""
    if profiling.request_ids is None:
        return [None] * len(profiling)
    by_id = {r.get("x_request_id"): i for i, r in enumerate(server) if r.get("x_request_id")}
    return [by_id.get(rid) if rid else None for rid in profiling.request_ids]


def measure(
    profiling: PhaseRecords,
    server: Sequence[Mapping[str, Any]],
    first_wave: int | None = None,
    tolerance: ClientTolerance = CLIENT_TOLERANCE,
    from_client_start: bool = False,
) -> Measured | None:
    """The truth of these requests (None: no record joined, or a succeeded request has none:
    a partial truth could miss the first wave, so the calibrated proxies decide then).

    ``from_client_start``: the client's start is its first byte written, and the server's
    latencies are taken from it (see the module's docstring).
    """
    found = join(profiling, server)
    joined = [(i, server[k]) for i, k in enumerate(found) if k is not None]
    unjoined = [k is None and ok for k, ok in zip(found, profiling.succeeded, strict=True)]
    if not joined or any(unjoined):
        return None
    distortion = client_distortion(_rows(profiling, joined, from_client_start), tolerance)
    late = None
    if profiling.credit_issued_ns is not None:
        issued = profiling.credit_issued_ns
        late = describe([(int(t["arrival_ns"]) - int(issued[i])) / NS_PER_MS for i, t in joined])
    cached = None
    if first_wave is not None:
        order = sorted(joined, key=lambda pair: int(pair[1]["arrival_ns"]))[:first_wave]
        cached = sum(int(t.get("cached_tokens") or 0) for _, t in order)
    return Measured(
        requests=len(joined),
        client_added_ms={k: _finite(v) for k, v in distortion.added_ms.items()},
        client_allowed_ms=dict(distortion.allowed_ms),
        client_beyond_tolerance=distortion.beyond_tolerance,
        measured_from="client_start" if from_client_start else "server_arrival",
        arrival_late_ms=late,
        first_wave_cached_tokens=cached,
    )


def distortion_of(measured: Measured) -> ClientDistortion:
    """The measured client-added latency as ``truth.ClientDistortion`` (for its sentence)."""
    added = {k: math.nan if v is None else v for k, v in measured.client_added_ms.items()}
    return ClientDistortion(added, measured.client_allowed_ms, measured.requests, CLIENT_TOLERANCE)


def client_check(measured: Measured) -> Check:
    """``client_added_latency_ms``: the worst client-added percentile against its tolerance."""
    d = distortion_of(measured)
    if all(v is None for v in measured.client_added_ms.values()):
        return unknown("client_added_latency_ms", "no succeeded request joined its server record")
    key = d.worst
    verdict = Verdict.FAIL if d.beyond_tolerance else Verdict.PASS
    return Check(
        name="client_added_latency_ms",
        verdict=verdict,
        observed=measured.client_added_ms[key],
        bound=d.allowed_ms[key],
        detail=f"{key.replace('_', ' ')}: {d.sentence()}",
    )


def lateness_check(measured: Measured) -> Check:
    """``arrival_late_p95_ms``: server arrival minus credit issue, p95, against its bound."""
    late = measured.arrival_late_ms
    return at_most(
        "arrival_late_p95_ms",
        None if late is None else late.p95,
        measured.arrival_late_bound_ms,
        "ms from AIPerf's decision to send until the server parsed the request (its truth)",
    )


def decide(
    measured: Measured,
    profiling: PhaseRecords,
    server: Sequence[Mapping[str, Any]],
    dispatch: DispatchFidelity,
    client_cost: ClientCost | None,
    cache: CacheColdness,
    warmup: PhaseRecords | None,
    cold_start_of: Callable[[PhaseRecords], ColdStart | None],
) -> tuple[DispatchFidelity, ClientCost, CacheColdness, Measured]:
    """The three verdicts decided by ``measured``; the proxies' verdicts and checks kept in it.

    ``cold_start_of(records)`` judges a first wave (``assess._cold_start``), here over the
    server's cached-token counts.
    """
    proxies: dict[str, Verdict] = {"load_generator_kept_up": dispatch.load_generator_kept_up}
    kept: list[Check] = []
    # load_generator_kept_up: the truth of lateness in place of the dispatch delay.
    late = lateness_check(measured)
    checks = tuple(dispatch.checks)
    if late.verdict is not Verdict.UNKNOWN:  # no credit times: the dispatch checks stay
        kept += [c for c in checks if c.name == "dispatch_delay_p95_ms"]
        checks = (late, *(c for c in checks if c.name != "dispatch_delay_p95_ms"))
    dispatch = dispatch.model_copy(
        update={"checks": checks, "load_generator_kept_up": combine_checks(checks)}
    )
    # client_cost_low: the client-added latency.
    truth = client_check(measured)
    if client_cost is None:
        client_cost = ClientCost(client_cost_low=truth.verdict, checks=(truth,))
    else:
        proxies["client_cost_low"] = client_cost.client_cost_low
        kept += client_cost.checks
    client_cost = client_cost.model_copy(
        update={"client_cost_low": truth.verdict, "checks": (truth,)}
    )
    # cache_cold: the same judgement over the server's cached-token counts.
    proxies["cache_cold"] = cache.cache_cold
    if cache.reset_requested:
        server_cached = _server_cached(profiling, server)
        judged = assess_cache(server_cached, warmup, True, cold_start_of(server_cached))
        kept += cache.checks
        cache = judged
    return (
        dispatch,
        client_cost,
        cache,
        measured.model_copy(update={"by_proxies": proxies, "proxy_checks": tuple(kept)}),
    )


def _server_cached(profiling: PhaseRecords, server: Sequence[Mapping[str, Any]]) -> PhaseRecords:
    """The records with each request's cached tokens as the server counted them."""
    cached = profiling.cached_prompt_tokens.copy()
    for i, k in enumerate(join(profiling, server)):
        if k is not None:
            cached[i] = float(server[k].get("cached_tokens") or 0)
    return replace(profiling, cached_prompt_tokens=cached)


def _rows(
    profiling: PhaseRecords,
    joined: list[tuple[int, Mapping[str, Any]]],
    from_client_start: bool = False,
) -> list[TruthRow]:
    """Succeeded requests as the client measured them beside the server's truth (its TTFT
    and E2E from the client's start when ``from_client_start``)."""
    nan = np.full(len(profiling), np.nan)
    ttft = profiling.ttft_ms if profiling.ttft_ms is not None else nan
    itl = profiling.itl_ms if profiling.itl_ms is not None else nan
    e2e = profiling.latency_ms if profiling.latency_ms is not None else nan
    rows = []
    for i, t in joined:
        if not profiling.succeeded[i] or t.get("ttft_ns") is None:
            continue
        n = int(t.get("completion_tokens") or 0)
        first, last = t.get("first_token_before_ns"), t.get("last_token_before_ns")
        spread = (last - first) / NS_PER_MS / (n - 1) if n > 1 and first and last else math.nan
        start = int(profiling.start_ns[i]) if from_client_start else None
        ttft_ns, e2e_ns = server_latencies_ns(t, start)
        rows.append(
            TruthRow(
                client_ttft_ms=float(ttft[i]),
                client_itl_ms=float(itl[i]),
                client_e2e_ms=float(e2e[i]),
                ttft_ms=ttft_ns / NS_PER_MS,
                itl_ms=spread,
                e2e_ms=e2e_ns / NS_PER_MS,
                arrival_ns=int(t["arrival_ns"]),
                end_ns=int(t["end_ns"]),
                status=int(t.get("status", 200)),
                cached_tokens=int(t.get("cached_tokens") or 0),
            )
        )
    return rows


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None

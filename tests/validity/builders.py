"""Constructed per-request columns for the validity unit tests."""

from __future__ import annotations

import numpy as np

from inferlab_bench.validity import PhaseRecords

T0 = 1_800_000_000 * 10**9
MS = 10**6


def ids(n: int, first: int = 0) -> tuple[str, ...]:
    return tuple(f"inferlab-{i:08d}" for i in range(first, first + n))


def records(
    start_ns: np.ndarray,
    end_ns: np.ndarray | None = None,
    *,
    issued_ns: np.ndarray | None = None,
    prompt: float | np.ndarray = 100.0,
    output: float | np.ndarray = 10.0,
    cached: float | np.ndarray = 0.0,
    good: np.ndarray | None = None,
    succeeded: np.ndarray | None = None,
    session_ids: tuple[str, ...] | None = None,
    send_ms: float | np.ndarray | None = 0.5,
    ttft_ms: float = 40.0,
    itl_ms: float | np.ndarray = 15.0,
    ttst_ms: float | np.ndarray = 15.0,
    first_burst_ms: np.ndarray | None = None,
    largest_burst_ms: float | np.ndarray | None = 0.0,
) -> PhaseRecords:
    n = len(start_ns)
    start = np.asarray(start_ns, dtype=np.int64)
    return PhaseRecords(
        session_ids=session_ids or ids(n),
        start_ns=start,
        end_ns=start + 50 * MS if end_ns is None else np.asarray(end_ns, dtype=np.int64),
        succeeded=np.ones(n, dtype=bool) if succeeded is None else succeeded,
        prompt_tokens=np.broadcast_to(np.asarray(prompt, dtype=np.float64), n).copy(),
        output_tokens=np.broadcast_to(np.asarray(output, dtype=np.float64), n).copy(),
        cached_prompt_tokens=np.broadcast_to(np.asarray(cached, dtype=np.float64), n).copy(),
        credit_issued_ns=start - MS if issued_ns is None else issued_ns,
        good=good,
        client_send_ms=None
        if send_ms is None
        else np.broadcast_to(np.asarray(send_ms, dtype=np.float64), n).copy(),
        ttft_ms=np.full(n, ttft_ms),
        itl_ms=np.broadcast_to(np.asarray(itl_ms, dtype=np.float64), n).copy(),
        ttst_ms=np.broadcast_to(np.asarray(ttst_ms, dtype=np.float64), n).copy(),
        first_burst_ms=first_burst_ms,
        largest_burst_ms=None
        if largest_burst_ms is None
        else np.broadcast_to(np.asarray(largest_burst_ms, dtype=np.float64), n).copy(),
    )


def renewal_starts(gaps_s: np.ndarray) -> np.ndarray:
    """Start times of a renewal process with these gaps (one gap before the first start)."""
    return T0 + (np.cumsum(gaps_s) * 1e9).astype(np.int64)


def poisson_starts(rate: float, n: int, seed: int = 0) -> np.ndarray:
    return renewal_starts(np.random.default_rng(seed).exponential(1.0 / rate, n))


def gamma_starts(rate: float, shape: float, n: int, seed: int = 0) -> np.ndarray:
    gaps = np.random.default_rng(seed).gamma(shape, 1.0 / (rate * shape), n)
    return renewal_starts(gaps)


def closed_loop(concurrency: int, n: int, latency_ms: float, gap_ms: float) -> PhaseRecords:
    """``concurrency`` slots each sending back to back: latency, then gap, then the next."""
    starts, ends = [], []
    for i in range(n):
        slot, round_ = i % concurrency, i // concurrency
        start = T0 + slot * MS // 10 + round_ * int((latency_ms + gap_ms) * MS)
        starts.append(start)
        ends.append(start + int(latency_ms * MS))
    order = np.argsort(starts)
    return records(np.asarray(starts)[order], np.asarray(ends)[order])

"""Client figures against a server's ground truth: the client-added latency, and its tolerance.

The simulator records, per request, when it parsed the first byte (arrival), when it began
writing the first and the last token, and when it finished; AIPerf's records carry the same
X-Request-ID. Joined, each request's client TTFT / ITL / E2E minus the server's is what the
client (its send, its read, its waits for a core) added. Where the client's start is its
first byte written, the server's figures run from that start instead of its arrival stamp,
which comes after its own wait to parse (``validity.measured``). ``client_cost_low`` protects that:
at p50 and at p90, over the same requests, the client may add at most
``max(floor_ms, relative * truth)`` (ITL: ``max(itl_floor_ms, relative * truth)``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

NS_PER_MS = 1e6
METRICS = ("ttft", "itl", "e2e")
QUANTILES = (50, 90)


@dataclass(frozen=True)
class ClientTolerance:
    """How much latency the client may add before its numbers are distorted."""

    floor_ms: float = 3.0
    """TTFT and E2E: on a 2-core host shared with the server and other work (load 12-25) the
    client added 0.2-2.5 ms to TTFT p90 with nothing wrong with it (docs/calibration.md)."""
    itl_floor_ms: float = 0.5
    relative: float = 0.05


CLIENT_TOLERANCE = ClientTolerance()


@dataclass(frozen=True)
class TruthRow:
    """One request seen by both sides (ms; ns stamps are the server's wall clock)."""

    client_ttft_ms: float
    client_itl_ms: float
    client_e2e_ms: float
    ttft_ms: float
    itl_ms: float
    e2e_ms: float
    arrival_ns: int
    end_ns: int
    status: int
    cached_tokens: int


@dataclass(frozen=True)
class ClientDistortion:
    """Client minus truth at p50 and p90 per metric, and whether any broke the tolerance."""

    added_ms: Mapping[str, float]
    """``ttft_p50`` ... ``e2e_p90`` -> client percentile minus truth percentile, ms."""
    allowed_ms: Mapping[str, float]
    requests: int
    tolerance: ClientTolerance

    @property
    def beyond_tolerance(self) -> bool:
        return any(self.added_ms[k] > self.allowed_ms[k] for k in self.added_ms)

    @property
    def worst(self) -> str:
        """The key whose added latency is largest against what it is allowed."""
        return max(self.added_ms, key=lambda k: self.added_ms[k] / self.allowed_ms[k])

    def figures(self) -> dict[str, float]:
        return {f"{k}_ms": v for k, v in self.added_ms.items()}

    def sentence(self) -> str:
        """How much the client added, in words, against the tolerance."""
        key = self.worst
        metric, q = key.split("_")
        state = "beyond" if self.beyond_tolerance else "within"
        return (
            f"against the server's ground truth ({self.requests} requests) the client added "
            f"{self.added_ms[key]:+.2f} ms to {metric.upper()} {q} (allowed "
            f"{self.allowed_ms[key]:.2f} ms), TTFT p90 {self.added_ms['ttft_p90']:+.2f} ms: "
            f"{state} tolerance"
        )


def server_latencies_ns(
    truth: Mapping[str, Any], client_start_ns: int | None = None
) -> tuple[int, int]:
    """The server's TTFT and E2E of one record (ns): from its arrival stamp, or from the
    client's start (its first byte written) when one is given (``validity.measured``)."""
    if client_start_ns is None or not truth.get("first_token_before_ns"):
        return int(truth["ttft_ns"]), int(truth["e2e_ns"])
    first, end = int(truth["first_token_before_ns"]), int(truth["end_ns"])
    return first - client_start_ns, end - client_start_ns


def truth_rows(
    client: Iterable[Mapping[str, Any]],
    server: Iterable[Mapping[str, Any]],
    from_client_start: bool = False,
) -> list[TruthRow]:
    """AIPerf profiling records joined to the server's records by X-Request-ID; the server's
    TTFT and E2E from the client's start (its first byte written) when ``from_client_start``
    (``validity.measured``)."""
    by_id = {s.get("x_request_id"): s for s in server if s.get("x_request_id")}
    rows = []
    for record in client:
        meta, metrics = record.get("metadata", {}), record.get("metrics", {})
        truth = by_id.get(meta.get("x_request_id"))
        if truth is None or record.get("error") or truth.get("ttft_ns") is None:
            continue
        n = int(truth.get("completion_tokens") or 0)
        first, last = truth["first_token_before_ns"], truth["last_token_before_ns"]
        start = int(meta["request_start_ns"]) if from_client_start else None
        ttft_ns, e2e_ns = server_latencies_ns(truth, start)
        rows.append(
            TruthRow(
                client_ttft_ms=_value(metrics, "time_to_first_token"),
                client_itl_ms=_value(metrics, "inter_token_latency"),
                client_e2e_ms=_value(metrics, "request_latency"),
                ttft_ms=ttft_ns / NS_PER_MS,
                itl_ms=(last - first) / NS_PER_MS / (n - 1) if n > 1 else float("nan"),
                e2e_ms=e2e_ns / NS_PER_MS,
                arrival_ns=int(truth["arrival_ns"]),
                end_ns=int(truth["end_ns"]),
                status=int(truth.get("status", 200)),
                cached_tokens=int(truth.get("cached_tokens") or 0),
            )
        )
    return rows


def client_distortion(
    rows: Iterable[TruthRow], tolerance: ClientTolerance = CLIENT_TOLERANCE
) -> ClientDistortion:
    """Per metric and quantile, the client's percentile minus the truth's over the same rows."""
    rows = list(rows)
    added, allowed = {}, {}
    for metric in METRICS:
        client = np.array([getattr(r, f"client_{metric}_ms") for r in rows], dtype=np.float64)
        truth = np.array([getattr(r, f"{metric}_ms") for r in rows], dtype=np.float64)
        keep = np.isfinite(client) & np.isfinite(truth)
        floor = tolerance.itl_floor_ms if metric == "itl" else tolerance.floor_ms
        for q in QUANTILES:
            key = f"{metric}_p{q}"
            if not keep.any():
                added[key], allowed[key] = float("nan"), floor
                continue
            c, t = np.percentile(client[keep], q), np.percentile(truth[keep], q)
            added[key] = float(c - t)
            allowed[key] = max(floor, tolerance.relative * float(t))
    return ClientDistortion(added, allowed, len(rows), tolerance)


def _value(metrics: Mapping[str, Any], tag: str) -> float:
    found = metrics.get(tag)
    value = found.get("value") if isinstance(found, Mapping) else None
    return float(value) if isinstance(value, int | float) else float("nan")

"""vLLM-style Prometheus ``/metrics``, counted from the ground-truth records themselves (pure).

Every record the ground-truth log takes is also handed to ``ServerMetrics.observe``, so
the counters are a function of the log and agree with it exactly:

- ``vllm:prompt_tokens_total`` and ``vllm:prefix_cache_queries_total``: the sum of
  ``prompt_tokens`` over request records that got a slot (``admitted_ns`` set);
  ``vllm:prefix_cache_hits_total``: the sum of their ``cached_tokens`` (tokens, as vLLM
  counts both).
- ``vllm:generation_tokens_total``: the sum of ``completion_tokens`` over all requests.
- ``vllm:request_success_total{finished_reason}``: status-200 records by finish reason,
  and status 499 (client gone) as ``abort``.
- ``vllm:time_to_first_token_seconds``: the record's ``ttft_ns`` (arrival to the start of
  the first token's write) where there was a first token;
  ``vllm:e2e_request_latency_seconds``: its ``e2e_ns`` (``end_ns - arrival_ns``) for every
  record counted in ``request_success``. Sums are kept in integer nanoseconds.
- ``vllm:num_requests_running`` / ``_waiting``: the engine's slots and queue, live.

Names, types and histogram buckets are vLLM's (V1 engine, ``vllm/v1/metrics/loggers.py``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
E2E_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
    60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
FINISH_REASONS = ("stop", "length", "abort")


@dataclass
class Histogram:
    """Cumulative-on-render bucket counts, an integer-ns sum and a count."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    sum_ns: int = 0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.bounds)

    def observe(self, ns: int) -> None:
        """Add one observation of ``ns`` nanoseconds."""
        index = bisect.bisect_left(self.bounds, ns / 1e9)
        if index < len(self.counts):
            self.counts[index] += 1
        self.sum_ns += ns
        self.count += 1


@dataclass
class ServerMetrics:
    """The counters and histograms, fed one ground-truth record at a time."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    cache_queries: int = 0
    cache_hits: int = 0
    finished: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FINISH_REASONS, 0))
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))

    def observe(self, record: Mapping[str, Any]) -> None:
        """Count one ground-truth record (reset records count nothing)."""
        if record.get("kind") != "request":
            return
        if record["admitted_ns"] is not None:
            self.prompt_tokens += record["prompt_tokens"]
            self.cache_queries += record["prompt_tokens"]
            self.cache_hits += record["cached_tokens"]
        self.generation_tokens += record["completion_tokens"]
        if record["ttft_ns"] is not None:
            self.ttft.observe(record["ttft_ns"])
        reason = finished_reason(record)
        if reason is not None:
            self.finished[reason] += 1
            self.e2e.observe(record["e2e_ns"])

    def render(self, model: str, running: int, waiting: int) -> str:
        """The Prometheus text exposition (version 0.0.4)."""
        labels = f'engine="0",model_name="{_escape(model)}"'
        lines: list[str] = []
        _gauge(lines, "vllm:num_requests_running", "Running requests.", labels, running)
        _gauge(lines, "vllm:num_requests_waiting", "Waiting requests.", labels, waiting)
        counters = (
            ("vllm:prompt_tokens", "Prefill tokens processed.", self.prompt_tokens),
            ("vllm:generation_tokens", "Generation tokens processed.", self.generation_tokens),
            ("vllm:prefix_cache_queries", "Prefix cache queries, in tokens.", self.cache_queries),
            ("vllm:prefix_cache_hits", "Prefix cache hits, in tokens.", self.cache_hits),
        )
        for name, help_text, value in counters:
            _counter(lines, name, help_text, [(labels, value)])
        success = [
            (f'{labels},finished_reason="{reason}"', self.finished[reason])
            for reason in FINISH_REASONS
        ]
        _counter(lines, "vllm:request_success", "Finished requests.", success)
        _histogram(lines, "vllm:time_to_first_token_seconds", "TTFT.", labels, self.ttft)
        _histogram(lines, "vllm:e2e_request_latency_seconds", "E2E latency.", labels, self.e2e)
        return "\n".join(lines) + "\n"


def finished_reason(record: Mapping[str, Any]) -> str | None:
    """The ``finished_reason`` label a request record counts under, or None."""
    if record["status"] == 499:
        return "abort"
    if record["status"] == 200 and record["finish_reason"] in FINISH_REASONS:
        return str(record["finish_reason"])
    return None


def _gauge(lines: list[str], name: str, help_text: str, labels: str, value: int) -> None:
    lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {value}"]


def _counter(
    lines: list[str], name: str, help_text: str, samples: Sequence[tuple[str, int]]
) -> None:
    lines += [f"# HELP {name}_total {help_text}", f"# TYPE {name}_total counter"]
    lines += [f"{name}_total{{{labels}}} {value}" for labels, value in samples]


def _histogram(lines: list[str], name: str, help_text: str, labels: str, h: Histogram) -> None:
    lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    running = 0
    for bound, count in zip(h.bounds, h.counts, strict=True):
        running += count
        lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {running}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {h.count}')
    lines.append(f"{name}_count{{{labels}}} {h.count}")
    lines.append(f"{name}_sum{{{labels}}} {h.sum_ns / 1e9!r}")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

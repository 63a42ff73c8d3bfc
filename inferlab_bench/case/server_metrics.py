"""The server's own counters (Prometheus ``/metrics``) around the run, beside our per-request sums.

Scraped right before AIPerf starts (after any reset) and right after it exits, so the
window holds every request AIPerf sent (warmup and profiling) and nothing else the case
sent. When our plugin runs between warmup and profiling (the reset after warmup) it also
scrapes there, and the window is the profiling phase alone. The counters each server
family exposes for the token totals are mapped to ours: the sums of ``usage.prompt_tokens``,
of the output lengths and of the cached prompt tokens over the same records; where the
server keeps TTFT and end-to-end histograms (vLLM, SGLang), their means over the window
sit beside ours, and the difference is what the client added. Differences are reported,
not judged here.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.case.records import CaseRecords, RecordColumns

SCHEMA_VERSION = 1
_OUR_TAGS = (
    ("usage_prompt_tokens", "prompt_tokens"),
    ("output_sequence_length", "output_tokens"),
    ("usage_prompt_cache_read_tokens", "cached_prompt_tokens"),
)
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{[^}]*\})?\s+(\S+)")
# Per family: our total -> the counters whose sum is the server's figure for it.
COUNTERS: dict[str, dict[str, tuple[str, ...]]] = {
    "llamacpp": {
        # llama.cpp counts processed and cached prompt tokens apart.
        "prompt_tokens": ("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total"),
        "cached_prompt_tokens": ("llamacpp:prompt_tokens_cached_total",),
        "output_tokens": ("llamacpp:tokens_predicted_total",),
    },
    "vllm": {
        "prompt_tokens": ("vllm:prompt_tokens_total",),
        "output_tokens": ("vllm:generation_tokens_total",),
        # The V1 engine counts prefix-cache hits in tokens (the gpu_ names are gone).
        "cached_prompt_tokens": ("vllm:prefix_cache_hits_total",),
        "requests": ("vllm:request_success_total",),
    },
    "sglang": {
        "prompt_tokens": ("sglang:prompt_tokens_total",),
        "output_tokens": ("sglang:generation_tokens_total",),
        "cached_prompt_tokens": ("sglang:cached_tokens_total",),
    },
}


# Per family: our mean latency (ms, AIPerf's) -> the server's histogram of the same span.
# The difference of the means over the window is what the client adds on top of the server.
LATENCIES: dict[str, dict[str, str]] = {
    "vllm": {
        "ttft_ms": "vllm:time_to_first_token_seconds",
        "request_latency_ms": "vllm:e2e_request_latency_seconds",
    },
    "sglang": {
        "ttft_ms": "sglang:time_to_first_token_seconds",
        "request_latency_ms": "sglang:e2e_request_latency_seconds",
    },
}
_OUR_LATENCY_TAGS = (("time_to_first_token", "ttft_ms"), ("request_latency", "request_latency_ms"))


@dataclass(frozen=True)
class Scrape:
    """One read of /metrics: every sample summed over its labels, and when."""

    time_ns: int
    values: dict[str, float]


def scrape(base_url: str, timeout: float = 5.0) -> Scrape | None:
    """GET /metrics; None when the server does not serve it (or not as Prometheus text)."""
    try:
        response = httpx.get(base_url.rstrip("/") + "/metrics", timeout=timeout)
    except httpx.HTTPError:
        return None
    return _scrape(response)


async def scrape_async(base_url: str, timeout: float = 5.0) -> Scrape | None:
    """``scrape`` for code running inside an event loop (the AIPerf plugin)."""
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.get(base_url.rstrip("/") + "/metrics")
    except httpx.HTTPError:
        return None
    return _scrape(response)


def _scrape(response: httpx.Response) -> Scrape | None:
    if response.status_code != 200:
        return None
    values = parse_prometheus(response.text)
    return Scrape(time.time_ns(), values) if values else None


def write_scrape(path: Path, found: Scrape | None) -> None:
    """One scrape as JSON (``null`` when the server serves no metrics)."""
    document = None if found is None else {"time_ns": found.time_ns, "values": found.values}
    write_bytes_atomic(path, orjson.dumps(document) + b"\n")


def read_scrape(path: Path) -> Scrape | None:
    """What ``write_scrape`` wrote; None when absent or unreadable."""
    try:
        document = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(document, dict):
        return None
    return Scrape(int(document["time_ns"]), {k: float(v) for k, v in document["values"].items()})


def parse_prometheus(text: str) -> dict[str, float]:
    """``name{labels} value [timestamp]`` lines -> name -> value summed over label sets."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if match is None:
            continue
        try:
            value = float(match.group(2))
        except ValueError:
            continue
        values[match.group(1)] = values.get(match.group(1), 0.0) + value
    return values


def our_totals(records: CaseRecords, *, profiling_only: bool = False) -> dict[str, float]:
    """Our figures over the succeeded records of the window, as the server counts them."""
    phases = (records.profiling,) if profiling_only else (records.warmup, records.profiling)
    ours: dict[str, float] = {}
    for tag, figure in _OUR_TAGS:
        values = np.concatenate([_succeeded(phase, tag) for phase in phases])
        if values.size and not np.all(np.isnan(values)):
            ours[figure] = float(np.nansum(values))
    ours["requests"] = float(sum(len(_succeeded(p, "request_latency")) for p in phases))
    for tag, figure in _OUR_LATENCY_TAGS:
        values = np.concatenate([_succeeded(phase, tag) for phase in phases])
        if values.size and not np.all(np.isnan(values)):
            ours[figure] = float(np.nanmean(values))
    return ours


def _succeeded(columns: RecordColumns, tag: str) -> npt.NDArray[np.float64]:
    ok = ~(
        np.asarray(columns.has_error, dtype=bool) | np.asarray(columns.was_cancelled, dtype=bool)
    )
    values: npt.NDArray[np.float64] = np.asarray(columns.metric(tag), dtype=np.float64)[ok]
    return values


def family(values: Mapping[str, float]) -> str | None:
    """The server family whose counters the scrape holds."""
    for name in COUNTERS:
        if any(key.startswith(f"{name}:") for key in values):
            return name
    return None


def comparison(
    before: Scrape | None,
    after: Scrape | None,
    ours: Mapping[str, float],
    window: str = "aiperf-run",
) -> dict[str, Any]:
    """server-metrics.json: the server's deltas beside our totals, per mapped figure."""
    document: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "window": window}
    if before is None or after is None:
        return document | {"served": False, "figures": {}}
    kind = family(after.values)
    deltas = {
        name: after.values[name] - before.values.get(name, 0.0)
        for name in sorted(after.values)
        if name.endswith("_total")
    }
    figures = {}
    for figure, counters in (COUNTERS.get(kind or "") or {}).items():
        if figure not in ours or not all(c in after.values for c in counters):
            continue
        server = sum(deltas.get(c, 0.0) for c in counters)
        figures[figure] = {
            "server": server,
            "ours": ours[figure],
            "difference": server - ours[figure],
            "counters": list(counters),
        }
    return document | {
        "served": True,
        "family": kind,
        "before_ns": before.time_ns,
        "after_ns": after.time_ns,
        "figures": figures,
        "latencies": latency_means(before, after, ours, kind),
        "counter_deltas": deltas,
    }


def latency_means(
    before: Scrape, after: Scrape, ours: Mapping[str, float], kind: str | None
) -> dict[str, Any]:
    """Per latency: the server's mean over the window (from its histogram) beside ours (ms)."""
    out = {}
    for figure, series in (LATENCIES.get(kind or "") or {}).items():
        count = after.values.get(f"{series}_count", 0.0) - before.values.get(f"{series}_count", 0.0)
        total = after.values.get(f"{series}_sum", 0.0) - before.values.get(f"{series}_sum", 0.0)
        if figure not in ours or count <= 0:
            continue
        server = total / count * 1000.0
        out[figure] = {
            "server_mean": server,
            "ours_mean": ours[figure],
            "client_added": ours[figure] - server,
            "server_count": count,
            "series": series,
        }
    return out

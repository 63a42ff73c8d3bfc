"""Pure translation of a BenchClientRequest into the AIPerf 0.13 config (``schemaVersion`` 2.0)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferlab_bench.case.aiperf_plugin import switches
from inferlab_bench.errors import ConfigurationError
from inferlab_bench.load import Load
from inferlab_bench.metric_tags import LATENCIES_MS
from inferlab_bench.protocol import (
    BenchClientRequest,
    BenchRequestSloInput,
    DatasetSource,
    RandomSource,
)

AIPERF_SCHEMA_VERSION = "2.0"
ARTIFACT_PREFIX = "profile"

BODY_DEFAULTS: dict[str, Any] = {
    "ignore_eos": True,
    "n": 1,
    "stream_options": {"include_usage": True},
}

_SLO_TAGS = LATENCIES_MS
"""The wire's SLO fields are named as our latencies."""


@dataclass(frozen=True)
class RequestBodyRecord:
    """The request body AIPerf sends, how it was made, and which defaults it replaced."""

    defaults: dict[str, Any]
    requested: dict[str, Any]
    body: dict[str, Any]
    replaced: dict[str, dict[str, Any]]
    """Dotted path -> {"default": ..., "value": ...} for every default the request changed."""

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "defaults": self.defaults,
            "request_body": self.requested,
            "body": self.body,
            "replaced_defaults": self.replaced,
        }


@dataclass(frozen=True)
class SessionReplay:
    """A conversation case: the derived trace AIPerf reads instead of the population, whose
    sessions (warmup then measured) the case counts instead of requests."""

    trace_path: Path
    sessions: int
    """Sessions in the trace (AIPerf's dataset entries)."""


STICKY_SESSIONS = "sticky-user-sessions"
"""AIPerf's connection reuse that keeps one connection per session across its turns."""


@dataclass(frozen=True)
class AiperfPlan:
    """Everything the runner needs: the config dict and the request-body record."""

    config: dict[str, Any]
    body: RequestBodyRecord
    reset_after_warmup: bool


def build_request_body(request: BenchClientRequest) -> RequestBodyRecord:
    """Deep-merge the defaults under ``definition.request_body`` and record what was replaced."""
    defaults = copy.deepcopy(BODY_DEFAULTS)
    source = request.definition.request_source
    if isinstance(source, RandomSource):
        defaults["min_tokens"] = source.output_tokens
    requested = _plain(request.definition.request_body)
    replaced: dict[str, dict[str, Any]] = {}
    body = _deep_merge(defaults, requested, "", replaced)
    return RequestBodyRecord(defaults=defaults, requested=requested, body=body, replaced=replaced)


def build_plan(
    request: BenchClientRequest,
    *,
    aiperf_dir: Path,
    timeout_seconds: float,
    reset_after_warmup: bool = False,
    record_schedule: bool = False,
    our_plugins: bool = False,
    sessions: SessionReplay | None = None,
) -> AiperfPlan:
    """The AIPerf config for ``request``; ConfigurationError when the case cannot be expressed.

    ``our_plugins``: AIPerf runs where our plugins are installed, so the config names our
    profiling timing strategy and our transport (``aiperf_plugin.switches``); the reset
    after warmup and the planned schedule need our profiling strategy in any case.
    ``sessions``: a conversation case, whose counts are sessions (``SessionReplay``).
    """
    _check_case(request)
    if timeout_seconds <= 0:
        raise ConfigurationError(
            f"case_budget_seconds: no time left for the load ({timeout_seconds:.3f} s remain)",
            hint="give the case a larger budget",
        )
    if reset_after_warmup and request.case.warmup_request_count == 0:
        raise ConfigurationError("reset after warmup asked for a case without warmup")
    body = build_request_body(request)
    benchmark: dict[str, Any] = {
        "model": request.model.served_name,
        "endpoint": _endpoint(request, body.body, timeout_seconds),
        "dataset": _dataset(request, sessions),
        "profiling": _profiling(request, our_plugins, reset_after_warmup or record_schedule),
        "tokenizer": _tokenizer(request),
        "runtime": {"ui": "none"},
        "gpuTelemetry": {"enabled": False},
        "serverMetrics": {"enabled": False},
        "artifacts": _artifacts(aiperf_dir),
    }
    if our_plugins:
        benchmark["endpoint"]["transport"] = switches.TRANSPORT
    if request.case.warmup_request_count:
        benchmark["warmup"] = _warmup(request)
    if sessions is not None:
        _count_sessions(benchmark)
    slos = slo_config(request.definition.request_slo)
    if slos:
        benchmark["slos"] = slos
    config = {
        "schemaVersion": AIPERF_SCHEMA_VERSION,
        "randomSeed": request.definition.seed,
        "benchmark": benchmark,
    }
    return AiperfPlan(config=config, body=body, reset_after_warmup=reset_after_warmup)


def total_entries(request: BenchClientRequest) -> int:
    """Dataset entries the case consumes: warmup first, then the profiling requests."""
    return request.case.warmup_request_count + request.case.request_count


def slo_config(slo: BenchRequestSloInput | None) -> dict[str, float]:
    """Our SLO fields (milliseconds) under AIPerf's metric tags."""
    if slo is None:
        return {}
    values = {field: getattr(slo, field) for field in _SLO_TAGS}
    return {_SLO_TAGS[field]: value for field, value in values.items() if value is not None}


def _check_case(request: BenchClientRequest) -> None:
    case = request.case
    Load.of(case.load_shape).check(warmup=case.warmup_request_count)
    slo = request.definition.request_slo
    if slo is not None and not slo_config(slo):
        raise ConfigurationError(
            "definition.request_slo: no bound set (request_latency_ms, ttft_ms or tpot_ms)"
        )


def _endpoint(request: BenchClientRequest, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    endpoint = request.endpoint
    return {
        "url": endpoint.base_url,
        "path": endpoint.chat_completions_path,
        "type": "chat",
        "streaming": True,
        "timeout": round(timeout, 3),
        "useServerTokenCount": True,
        "extra": body,
    }


def _count_sessions(benchmark: dict[str, Any]) -> None:
    """Phases stop after their count of whole sessions (AIPerf starts no new session past it
    and finishes the started ones), over one sticky connection per session."""
    for name in ("warmup", "profiling"):
        phase = benchmark.get(name)
        if phase is not None:
            phase["sessions"] = phase.pop("requests")
    benchmark["endpoint"]["connectionReuse"] = STICKY_SESSIONS


def _dataset(request: BenchClientRequest, sessions: SessionReplay | None) -> dict[str, Any]:
    source = request.definition.request_source
    entries = total_entries(request)
    if isinstance(source, DatasetSource):
        population = request.population
        if population is None:
            raise ConfigurationError(
                "population: a dataset request source needs the prepared population",
                hint="run `inferlab-bench prepare` and pass its population in the request",
            )
        path = population.path if sessions is None else sessions.trace_path
        return {
            "type": "file",
            "path": str(path),
            "format": "mooncake_trace",
            "entries": entries if sessions is None else sessions.sessions,
            "sampling": "sequential",
        }
    return {
        "type": "synthetic",
        "entries": entries,
        "randomSeed": request.definition.seed,
        "sampling": "sequential",
        "prompts": {"isl": source.input_tokens, "osl": source.output_tokens},
    }


def _profiling(request: BenchClientRequest, our_plugins: bool, hooked: bool) -> dict[str, Any]:
    phase = Load.of(request.case.load_shape).aiperf_phase(request.case.request_count)
    if hooked:
        phase["timingMode"] = switches.RESET_AFTER_WARMUP_TIMING_MODE
    elif our_plugins:
        phase["timingMode"] = switches.CREDIT_WAIT_TIMING_MODE
    return phase


def _tokenizer(request: BenchClientRequest) -> dict[str, Any]:
    tokenizer: dict[str, Any] = {"name": request.model.locator}
    if isinstance(request.definition.request_source, RandomSource):
        # input_tokens are what the server sees: AIPerf sizes the text net of the chat template.
        tokenizer["applyChatTemplate"] = True
    return tokenizer


def _warmup(request: BenchClientRequest) -> dict[str, Any]:
    # No timingMode: AIPerf 0.13 runs every warmup with its built-in request_rate whatever
    # the phase says (timing/config.py, _build_warmup_config).
    return Load.of(request.case.load_shape).aiperf_phase(request.case.warmup_request_count)


def _artifacts(aiperf_dir: Path) -> dict[str, Any]:
    return {
        "dir": str(aiperf_dir),
        "prefix": ARTIFACT_PREFIX,
        "summary": ["json"],
        "records": ["jsonl"],
        "raw": True,
    }


def _deep_merge(
    base: dict[str, Any], over: dict[str, Any], path: str, replaced: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in over.items():
        where = f"{path}{key}"
        if isinstance(merged.get(key), dict) and isinstance(value, dict):
            merged[key] = _deep_merge(merged[key], value, f"{where}.", replaced)
            continue
        if key in merged and merged[key] != value:
            replaced[where] = {"default": merged[key], "value": value}
        merged[key] = copy.deepcopy(value)
    return merged


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value

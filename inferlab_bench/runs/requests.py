"""Pure translation of a person's options into the protocol's BenchClientRequest."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from inferlab_bench.errors import ConfigurationError
from inferlab_bench.protocol import (
    BenchCaseInput,
    BenchClientRequest,
    BenchDefinitionInput,
    BenchLoadInput,
    BenchPopulationInput,
    BenchRequestSloInput,
    ClientEndpointInput,
    DatasetSource,
    EndpointProtocol,
    MeasurementModelInput,
    RandomSource,
    RequestBody,
)


@dataclass(frozen=True)
class Target:
    """The server under test as a person names it."""

    url: str
    served_name: str
    tokenizer: str
    chat_completions_path: str = "/v1/chat/completions"
    completions_path: str = "/v1/completions"


@dataclass(frozen=True)
class Workload:
    """What is sent: a frozen population (with its dataset source) or synthetic prompts."""

    source: DatasetSource | RandomSource
    population: BenchPopulationInput | None
    seed: int = 0
    request_body: RequestBody = field(default_factory=dict)
    slo: BenchRequestSloInput | None = None
    reset_prefix_cache: bool = False


@dataclass(frozen=True)
class CaseShape:
    load: BenchLoadInput
    requests: int
    warmup: int = 0
    budget_seconds: float = 3600.0


def slo_input(
    ttft_ms: float | None, tpot_ms: float | None, latency_ms: float | None, minimum_ratio: float
) -> BenchRequestSloInput | None:
    if ttft_ms is None and tpot_ms is None and latency_ms is None:
        return None
    return BenchRequestSloInput(
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        request_latency_ms=latency_ms,
        minimum_good_request_ratio=minimum_ratio,
    )


def endpoint_input(target: Target) -> ClientEndpointInput:
    """``http://HOST:PORT`` -> the protocol endpoint (only plain HTTP is in the protocol)."""
    parts = urlsplit(target.url if "://" in target.url else f"http://{target.url}")
    if parts.scheme != "http" or not parts.hostname:
        raise ConfigurationError(f"--url {target.url!r}: expected http://HOST:PORT")
    try:
        port = parts.port or 80
    except ValueError as exc:
        raise ConfigurationError(f"--url {target.url!r}: the port is not a number 0-65535") from exc
    return ClientEndpointInput(
        protocol=EndpointProtocol.HTTP,
        host=parts.hostname,
        port=port,
        completions_path=target.completions_path,
        chat_completions_path=target.chat_completions_path,
    )


def case_request(
    target: Target, workload: Workload, shape: CaseShape, artifact_dir: Path
) -> BenchClientRequest:
    definition = BenchDefinitionInput(
        request_source=workload.source,
        seed=workload.seed,
        request_body=workload.request_body,
        request_slo=workload.slo,
        timeout_seconds=int(shape.budget_seconds),
        reset_prefix_cache=workload.reset_prefix_cache,
    )
    return BenchClientRequest(
        protocol_version="6",
        endpoint=endpoint_input(target),
        model=MeasurementModelInput(locator=target.tokenizer, served_name=target.served_name),
        definition=definition,
        population=workload.population,
        case=BenchCaseInput(
            load_shape=shape.load, request_count=shape.requests, warmup_request_count=shape.warmup
        ),
        case_budget_seconds=shape.budget_seconds,
        artifact_dir=artifact_dir,
    )


def with_load(shape: CaseShape, load: BenchLoadInput) -> CaseShape:
    return replace(shape, load=load)

"""The protocol v6 wire models for the Bench client (the one place they are defined).

Shapes follow ``shared/spec/wire.rs``: every struct denies unknown fields, tagged enums
use a ``kind`` discriminator in snake_case, ``Option`` fields may be omitted (and are
written as ``null``), unsigned integers reject negatives. Parsing is strict: a string
is never coerced into a number, nor a number into a bool.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from typing_extensions import TypeAliasType

from inferlab_bench.errors import RequestError

PROTOCOL_VERSION = "6"
RESULT_SCHEMA_VERSION = 1
NORMALIZATION_SCHEMA = "aiperf-summary-v1"

U16 = Annotated[int, Field(ge=0, le=2**16 - 1)]
U32 = Annotated[int, Field(ge=0, le=2**32 - 1)]
U64 = Annotated[int, Field(ge=0, le=2**64 - 1)]
I32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
F64 = Annotated[float, Field(allow_inf_nan=False)]

SettingValue = TypeAliasType(
    "SettingValue",
    "bool | int | float | str | list[SettingValue] | dict[str, SettingValue]",
)
"""Structured JSON data (no null), as the spec's untagged ``SettingValue``."""

RequestBody: TypeAlias = dict[str, SettingValue]


class WireModel(BaseModel):
    """Base of every wire struct: unknown fields are errors, no type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ClientStatus(enum.StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class EndpointProtocol(enum.StrEnum):
    HTTP = "http"


class BenchDatasetInput(enum.StrEnum):
    SHAREGPT = "sharegpt"


class BenchDatasetCacheState(enum.StrEnum):
    MISSING = "missing"
    PRESENT = "present"


ProtocolVersion: TypeAlias = Literal["6"]


class MeasurementModelInput(WireModel):
    locator: str
    served_name: str


class ClientEndpointInput(WireModel):
    protocol: EndpointProtocol
    host: str
    port: U16
    completions_path: str
    chat_completions_path: str

    @property
    def chat_completions_url(self) -> str:
        return f"http://{self.host}:{self.port}{self.chat_completions_path}"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


class BenchDatasetCatalogInput(WireModel):
    upstream_identity: str
    url: str
    sha256: str
    source_format: str
    license: str
    cache_path: Path
    cache_state: BenchDatasetCacheState
    materialization_identity: str


class RandomSource(WireModel):
    kind: Literal["random"]
    input_tokens: U32
    output_tokens: U32


class DatasetSource(WireModel):
    kind: Literal["dataset"]
    dataset: BenchDatasetInput
    max_input_tokens: U32
    output_tokens: U32 | None = None
    catalog: BenchDatasetCatalogInput


BenchRequestSourceInput = Annotated[RandomSource | DatasetSource, Field(discriminator="kind")]


class BenchRequestSloInput(WireModel):
    request_latency_ms: F64 | None = None
    ttft_ms: F64 | None = None
    tpot_ms: F64 | None = None
    minimum_good_request_ratio: F64


class BenchDefinitionInput(WireModel):
    request_source: BenchRequestSourceInput
    seed: U64
    request_body: RequestBody = Field(default_factory=dict)
    request_slo: BenchRequestSloInput | None = None
    timeout_seconds: U64
    reset_prefix_cache: bool = False


class BenchPopulationInput(WireModel):
    path: Path
    sha256: str
    entries: U32
    tpot_applicable: bool


class ConcurrencyLimited(WireModel):
    kind: Literal["concurrency_limited"]
    concurrency: U32


class RequestRateLimited(WireModel):
    kind: Literal["request_rate_limited"]
    request_rate: F64
    burstiness: F64 | None = None


class UnboundedRequestRate(WireModel):
    kind: Literal["unbounded_request_rate"]


BenchLoadInput = Annotated[
    ConcurrencyLimited | RequestRateLimited | UnboundedRequestRate,
    Field(discriminator="kind"),
]


class BenchCaseInput(WireModel):
    load_shape: BenchLoadInput
    request_count: U32
    warmup_request_count: U32 = 0


class BenchClientRequest(WireModel):
    protocol_version: ProtocolVersion
    endpoint: ClientEndpointInput
    model: MeasurementModelInput
    definition: BenchDefinitionInput
    population: BenchPopulationInput | None = None
    case: BenchCaseInput
    case_budget_seconds: F64
    artifact_dir: Path


class BenchDatasetPreparationRequest(WireModel):
    protocol_version: ProtocolVersion
    model: MeasurementModelInput
    request_source: BenchRequestSourceInput
    source_path: Path
    required_entries: U32
    seed: U64
    request_body: RequestBody = Field(default_factory=dict)
    artifact_dir: Path


class BenchTokenCountSummary(WireModel):
    minimum: U32
    maximum: U32
    mean: F64


class BenchDatasetPreparationResult(WireModel):
    schema_version: U32 = RESULT_SCHEMA_VERSION
    status: ClientStatus
    materialization_identity: str
    requested_entries: U32
    candidate_entries: U64 = 0
    admitted_entries: U64 = 0
    ineligible_entries: U64 = 0
    ineligible_reasons: dict[str, U64] = Field(default_factory=dict)
    population: BenchPopulationInput | None = None
    input_tokens: BenchTokenCountSummary | None = None
    output_tokens: BenchTokenCountSummary | None = None
    evidence_path: Path | None = None
    error: str | None = None


class BenchRequestSloResult(WireModel):
    good_requests: U64
    good_request_ratio: F64
    goodput: F64
    profiling_duration_seconds: F64
    profiling_duration_source: str
    request_count_reconciled: bool
    native_aggregate_good_request_count: U64 | None = None
    native_aggregate_good_request_count_consistent: bool | None = None


class RawArtifact(WireModel):
    name: str
    kind: str
    path: Path


class BenchClientResult(WireModel):
    schema_version: U32 = RESULT_SCHEMA_VERSION
    status: ClientStatus
    completed_requests: U64 = 0
    failed_requests: U64 = 0
    normalization_schema: str = NORMALIZATION_SCHEMA
    metrics: dict[str, F64] = Field(default_factory=dict)
    request_slo: BenchRequestSloResult | None = None
    native_command: list[str] = Field(default_factory=list)
    native_exit_code: I32 | None = None
    raw_artifacts: list[RawArtifact] = Field(default_factory=list)
    error: str | None = None


SETTING_VALUE_ADAPTER: TypeAdapter[SettingValue] = TypeAdapter(SettingValue)

ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_request(model: type[ModelT], data: bytes | str) -> ModelT:
    """Parse one JSON request; any problem becomes a ``RequestError`` naming the field."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise RequestError(
            f"invalid {model.__name__}: {describe_validation_error(exc)}",
            hint="see shared/spec/adapter-protocol-v6.schema.json for the expected shape",
        ) from exc


def describe_validation_error(exc: ValidationError, limit: int = 5) -> str:
    """Render pydantic errors as ``field.path: what was expected (found X)``."""
    parts = []
    for error in exc.errors()[:limit]:
        path = ".".join(str(item) for item in error["loc"]) or "(top level)"
        message = _EXPECTATIONS.get(error["type"], error["msg"])
        if error["type"] == "literal_error" and "expected" in error.get("ctx", {}):
            message = f"expected {error['ctx']['expected']}"
        found = error.get("input")
        shown = "" if error["type"] == "missing" else f" (found {_short(found)})"
        parts.append(f"{path}: {message}{shown}")
    more = len(exc.errors()) - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


_EXPECTATIONS = {
    "missing": "required field is missing",
    "extra_forbidden": "unknown field (not in protocol v6)",
    "json_invalid": "not valid JSON",
}


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def dump_json(model: BaseModel) -> bytes:
    """Serialize a wire model as the spec does: every field present, None as null."""
    return model.model_dump_json(indent=2).encode("utf-8") + b"\n"

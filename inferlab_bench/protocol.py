"""The protocol v6 wire models for the Bench client (the one place they are defined).

Shapes follow the protocol v6 spec (``wire.rs``; our generated copy of its schema is
``inferlab_bench/schema/protocol-v6.schema.json``): every struct denies unknown fields,
tagged enums use a ``kind`` discriminator in snake_case, ``Option`` fields may be omitted
(and are written as ``null``), unsigned integers reject negatives. Parsing is strict: a
string is never coerced into a number, nor a number into a bool.

Beyond the wire shapes, the request models check what the spec leaves to prose: strings
that name things are non-empty and hold no NUL, paths carry no ``..``, counts and bounds
are positive, digests are 64 lower-case hex digits. With ``parse_request(...,
check_paths=True)`` (JSON mode) the paths are also checked against the file system
(``inferlab_bench.atomic``): the right kind of file, readable or writable.
"""

from __future__ import annotations

import enum
import re
from pathlib import Path
from typing import Annotated, Literal, TypeAlias, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError
from typing_extensions import TypeAliasType

from inferlab_bench import atomic
from inferlab_bench.errors import RequestError

PROTOCOL_VERSION = "6"
RESULT_SCHEMA_VERSION = 1
NORMALIZATION_SCHEMA = "aiperf-summary-v1"

U16 = Annotated[int, Field(ge=0, le=2**16 - 1)]
U32 = Annotated[int, Field(ge=0, le=2**32 - 1)]
U64 = Annotated[int, Field(ge=0, le=2**64 - 1)]
I32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
F64 = Annotated[float, Field(allow_inf_nan=False)]
PositiveU32 = Annotated[int, Field(ge=1, le=2**32 - 1)]
PositiveU64 = Annotated[int, Field(ge=1, le=2**64 - 1)]
PositiveF64 = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Ratio = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
Port = Annotated[int, Field(ge=1, le=2**16 - 1)]


def _text(value: object) -> object:
    """Names and identities: non-empty, no NUL or other control character."""
    if isinstance(value, str):
        if not value.strip():
            raise PydanticCustomError("empty_text", "must not be empty")
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
            raise PydanticCustomError(
                "control_character", "must not contain a NUL byte or control character"
            )
    return value


def _wire_path(value: object) -> object:
    """A path on the wire: non-empty, no NUL, no ``..`` (``Path("")`` would mean cwd)."""
    if isinstance(value, str):
        problem = atomic.wire_path_problem(value)
        if problem is not None:
            raise PydanticCustomError("bad_path", problem)
    return value


def is_sha256_hex(value: str) -> bool:
    """A sha256 digest as the protocol writes it: 64 lower-case hex digits."""
    return _HEX64.fullmatch(value) is not None


def _sha256(value: str) -> str:
    if not is_sha256_hex(value):
        raise PydanticCustomError("sha256_format", "expected 64 lower-case hex digits")
    return value


def _host(value: str) -> str:
    if any(ch.isspace() or ch in "/?#@" for ch in value):
        raise PydanticCustomError(
            "host_format", "expected a host name or address (no spaces or / ? # @)"
        )
    return value


def _url_path(value: str) -> str:
    if not value.startswith("/") or any(ch.isspace() for ch in value):
        raise PydanticCustomError("url_path_format", "expected a URL path starting with '/'")
    return value


def _unused_url_path(value: str) -> str:
    # Part of the shared endpoint struct but never called by us: empty is let through.
    return value if value == "" else _url_path(value)


_HEX64 = re.compile(r"[0-9a-f]{64}")
Text = Annotated[str, BeforeValidator(_text)]
WirePath = Annotated[Path, BeforeValidator(_wire_path)]
Sha256 = Annotated[str, AfterValidator(_sha256)]
Host = Annotated[Text, AfterValidator(_host)]
UrlPath = Annotated[Text, AfterValidator(_url_path)]
UnusedUrlPath = Annotated[str, AfterValidator(_unused_url_path)]
CallerPath = Annotated[Path, BeforeValidator(_text)]
"""A path the caller reports but we never open (``catalog.cache_path``): non-empty, no NUL."""

SettingValue = TypeAliasType(
    "SettingValue",
    "bool | int | float | str | list[SettingValue] | dict[str, SettingValue]",
)
"""Structured JSON data (no null), as the spec's untagged ``SettingValue``."""

RequestBody: TypeAlias = dict[str, SettingValue]


class WireModel(BaseModel):
    """Base of every wire struct: unknown fields are errors, no type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


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
    locator: Text
    served_name: Text


class ClientEndpointInput(WireModel):
    protocol: EndpointProtocol
    host: Host
    port: Port
    completions_path: UnusedUrlPath
    chat_completions_path: UrlPath

    @property
    def chat_completions_url(self) -> str:
        return f"http://{self.host}:{self.port}{self.chat_completions_path}"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


class BenchDatasetCatalogInput(WireModel):
    upstream_identity: Text
    url: Text
    sha256: Sha256
    source_format: Text
    license: Text
    cache_path: CallerPath
    cache_state: BenchDatasetCacheState
    materialization_identity: Text


class RandomSource(WireModel):
    kind: Literal["random"]
    input_tokens: PositiveU32
    output_tokens: PositiveU32


class DatasetSource(WireModel):
    kind: Literal["dataset"]
    dataset: BenchDatasetInput
    max_input_tokens: PositiveU32
    output_tokens: PositiveU32 | None = None
    catalog: BenchDatasetCatalogInput


BenchRequestSourceInput = Annotated[RandomSource | DatasetSource, Field(discriminator="kind")]


class BenchRequestSloInput(WireModel):
    request_latency_ms: PositiveF64 | None = None
    ttft_ms: PositiveF64 | None = None
    tpot_ms: PositiveF64 | None = None
    minimum_good_request_ratio: Ratio


class BenchDefinitionInput(WireModel):
    request_source: BenchRequestSourceInput
    seed: U64
    request_body: RequestBody = Field(default_factory=dict)
    request_slo: BenchRequestSloInput | None = None
    timeout_seconds: PositiveU64
    reset_prefix_cache: bool = False


class BenchPopulationInput(WireModel):
    path: WirePath
    sha256: Sha256
    entries: PositiveU32
    tpot_applicable: bool

    @field_validator("path")
    @classmethod
    def _readable_file(cls, value: Path, info: ValidationInfo) -> Path:
        return _check_on_disk(value, info, atomic.readable_file_problem)


class ConcurrencyLimited(WireModel):
    kind: Literal["concurrency_limited"]
    concurrency: PositiveU32


class RequestRateLimited(WireModel):
    kind: Literal["request_rate_limited"]
    request_rate: PositiveF64
    burstiness: PositiveF64 | None = None


class UnboundedRequestRate(WireModel):
    kind: Literal["unbounded_request_rate"]


BenchLoadInput = Annotated[
    ConcurrencyLimited | RequestRateLimited | UnboundedRequestRate,
    Field(discriminator="kind"),
]


class BenchCaseInput(WireModel):
    load_shape: BenchLoadInput
    request_count: PositiveU32
    warmup_request_count: U32 = 0


class BenchClientRequest(WireModel):
    protocol_version: ProtocolVersion
    endpoint: ClientEndpointInput
    model: MeasurementModelInput
    definition: BenchDefinitionInput
    population: BenchPopulationInput | None = None
    case: BenchCaseInput
    case_budget_seconds: PositiveF64
    artifact_dir: WirePath

    @field_validator("artifact_dir")
    @classmethod
    def _writable_dir(cls, value: Path, info: ValidationInfo) -> Path:
        return _check_on_disk(value, info, atomic.writable_dir_problem)


class BenchDatasetPreparationRequest(WireModel):
    protocol_version: ProtocolVersion
    model: MeasurementModelInput
    request_source: BenchRequestSourceInput
    source_path: WirePath
    required_entries: PositiveU32
    seed: U64
    request_body: RequestBody = Field(default_factory=dict)
    artifact_dir: WirePath

    @field_validator("source_path")
    @classmethod
    def _source_file(cls, value: Path, info: ValidationInfo) -> Path:
        # Absent is fine (the cache or a download supplies the bytes); present must be a file.
        return _check_on_disk(value, info, atomic.optional_file_problem)

    @field_validator("artifact_dir")
    @classmethod
    def _writable_dir(cls, value: Path, info: ValidationInfo) -> Path:
        return _check_on_disk(value, info, atomic.writable_dir_problem)


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


def _check_on_disk(value: Path, info: ValidationInfo, problem_of: atomic.ProblemFinder) -> Path:
    """Run a file-system check only when the caller asked for it (JSON mode's input)."""
    if isinstance(info.context, dict) and info.context.get(CHECK_PATHS):
        problem = problem_of(value)
        if problem is not None:
            raise PydanticCustomError(_PATH_UNUSABLE, "{problem}", {"problem": problem})
    return value


CHECK_PATHS = "check_paths"
_PATH_UNUSABLE = "path_unusable"

SETTING_VALUE_ADAPTER: TypeAdapter[SettingValue] = TypeAdapter(SettingValue)

ModelT = TypeVar("ModelT", bound=BaseModel)


PATH_HINT = (
    "the request's paths are used on this machine: artifact_dir a directory this user can "
    "create or write, input files regular files it can read"
)
SCHEMA_HINT = (
    "see the protocol v6 schema shipped with inferlab-bench "
    "(inferlab_bench/schema/protocol-v6.schema.json) for the expected shape"
)


def parse_request(model: type[ModelT], data: bytes | str, *, check_paths: bool = False) -> ModelT:
    """Parse one JSON request; any problem becomes a ``RequestError`` naming the field.

    ``check_paths`` also checks the request's paths on this machine (a request about to
    run); leave it off to read a saved request back.
    """
    try:
        return model.model_validate_json(data, context={CHECK_PATHS: check_paths})
    except ValidationError as exc:
        on_disk = any(error["type"] == _PATH_UNUSABLE for error in exc.errors())
        raise RequestError(
            f"invalid {model.__name__}: {describe_validation_error(exc)}",
            hint=PATH_HINT if on_disk else SCHEMA_HINT,
        ) from exc


def check_on_disk(request: ModelT) -> ModelT:
    """Check a request built in-process against this machine, as JSON mode does on parse."""
    return parse_request(type(request), request.model_dump_json(), check_paths=True)


def describe_validation_error(exc: ValidationError, limit: int = 5) -> str:
    """Render pydantic errors as ``field.path: what was expected (found X)``."""
    parts = []
    for error in exc.errors()[:limit]:
        path = ".".join(str(item) for item in error["loc"]) or "(top level)"
        message = _EXPECTATIONS.get(error["type"], error["msg"])
        if error["type"] == "literal_error" and "expected" in error.get("ctx", {}):
            message = f"expected {error['ctx']['expected']}"
        found = error.get("input")
        shown = "" if error["type"] in ("missing", _PATH_UNUSABLE) else f" (found {_short(found)})"
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

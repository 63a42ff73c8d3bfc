"""The trust boundary of a bundle: typed, bounded models of BUNDLE.json and safe member names.

A bundle comes from a stranger. Its index is parsed into these models (sizes, counts and
string lengths bounded; digests shaped; extra fields refused) before any of it is used, and
every name in it must be a canonical relative path that stays inside the bundle.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator

from inferlab_bench.errors import BundleError
from inferlab_bench.protocol import describe_validation_error
from inferlab_bench.publish.contents import BUNDLE_SCHEMA, INDEX_FILE

MAX_INDEX_BYTES = 16 * 1024**2
"""BUNDLE.json itself: ours is a few kB per case."""
MAX_MEMBER_BYTES = 512 * 1024**2
"""One member: a population of tens of thousands of conversations stays far below this."""
MAX_TOTAL_BYTES = 1024**3
"""Every member together (a bundle is held in memory while it is verified)."""
MAX_MEMBERS = 20_000
MAX_CASES = 1_000
MAX_TRIALS = 100
MAX_NAME_CHARS = 512
MAX_TEXT_CHARS = 4_096
MAX_FACTS = 64

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Scalar = str | int | float | bool | None


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a safe member name (None when it is canonical, relative, inside)."""
    if not name or len(name) > MAX_NAME_CHARS:
        return f"must be 1 to {MAX_NAME_CHARS} characters"
    if "\x00" in name or "\\" in name or any(ord(c) < 32 for c in name):
        return "has a NUL, control character or backslash in its name"
    pure = PurePosixPath(name)
    if pure.is_absolute():
        return "has an absolute name"
    if ".." in pure.parts:
        return "has a '..' component (it would land outside the target)"
    if pure.as_posix() != name.rstrip("/") or "." in pure.parts:
        return "is not a canonical relative name (empty or '.' components)"
    return None


def _safe_name(value: str) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(f"{value!r} {problem}")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MemberEntry(_Strict):
    path: str
    sha256: Sha256
    size: Annotated[int, Field(ge=0, le=MAX_MEMBER_BYTES)]

    _path = field_validator("path")(_safe_name)


class CaseEntry(_Strict):
    path: str
    label: Text
    trials: Annotated[list[str], Field(min_length=1, max_length=MAX_TRIALS)]
    reset: Annotated[str, Field(max_length=MAX_NAME_CHARS)] | None = None

    @field_validator("path")
    @classmethod
    def _inside(cls, value: str) -> str:
        return _safe_name(value)

    @field_validator("trials")
    @classmethod
    def _trials_inside(cls, value: list[str]) -> list[str]:
        return [_safe_name(v) for v in value]


class PopulationEntry(_Strict):
    path: str
    sha256: Sha256
    entries: Annotated[int, Field(ge=1, le=100_000_000)]
    preparation: Annotated[dict[str, JsonValue], Field(max_length=MAX_FACTS)] | None = None
    """Read again by ``reprepare``, which compares each field with the new manifest."""

    _path = field_validator("path")(_safe_name)


class BundleIndex(_Strict):
    """BUNDLE.json as written by ``bundle``; nothing in it is trusted beyond its shape."""

    schema_name: Literal["inferlab-bundle-v1"]  # BUNDLE_SCHEMA
    schema_version: Literal[1]
    source: Annotated[str, Field(max_length=MAX_NAME_CHARS)] | None = None
    records: bool = True
    versions: Annotated[dict[str, Scalar], Field(max_length=MAX_FACTS)] = Field(
        default_factory=dict
    )
    machine: Annotated[dict[str, Scalar], Field(max_length=MAX_FACTS)] = Field(default_factory=dict)
    cases: Annotated[list[CaseEntry], Field(min_length=1, max_length=MAX_CASES)]
    population: PopulationEntry | None = None
    members: Annotated[list[MemberEntry], Field(max_length=MAX_MEMBERS)]

    @field_validator("members")
    @classmethod
    def _bounded_total(cls, value: list[MemberEntry]) -> list[MemberEntry]:
        total = sum(m.size for m in value)
        if total > MAX_TOTAL_BYTES:
            raise ValueError(f"members add up to {total} bytes, more than {MAX_TOTAL_BYTES}")
        names = [m.path for m in value]
        if len(set(names)) != len(names):
            raise ValueError("a member is listed twice")
        return value

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def parse_index(where: object, blob: bytes) -> BundleIndex:
    """BUNDLE.json's bytes -> the typed index, or one BundleError naming the field."""
    if len(blob) > MAX_INDEX_BYTES:
        raise BundleError(f"{where}: {INDEX_FILE} is {len(blob)} bytes, at most {MAX_INDEX_BYTES}")
    try:
        return BundleIndex.model_validate_json(blob)
    except ValidationError as exc:
        raise BundleError(
            f"{where}: {INDEX_FILE} is not a valid {BUNDLE_SCHEMA} index: "
            f"{describe_validation_error(exc, limit=2)}",
            hint="make bundles with `inferlab-bench bundle`; this one was altered or is not ours",
        ) from exc

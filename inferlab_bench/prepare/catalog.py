"""Catalog entries (datasets_catalog/) and the check that a request's catalog agrees with them."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from inferlab_bench.errors import CatalogMismatchError, DatasetError
from inferlab_bench.layout import CATALOG_DIR_ENV
from inferlab_bench.protocol import (
    BenchDatasetCatalogInput,
    describe_validation_error,
    is_sha256_hex,
)

COMPARED_FIELDS = (
    "upstream_identity",
    "url",
    "sha256",
    "source_format",
    "license",
    "materialization_identity",
)


EXTENSION_MATERIALIZATIONS: dict[str, tuple[str, ...]] = {
    "sharegpt-single-request-v1": ("sharegpt-multi-turn-v1",),
}
"""Our own materializations (not protocol v6's) of a source catalogued under the key: a
request's catalog may name one of them instead of the entry's identity."""


class CatalogEntry(BaseModel):
    """One dataset as the release knows it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str
    upstream_identity: str
    url: str
    sha256: str
    size_bytes: int | None = None
    source_format: str
    license: str
    materialization_identity: str

    @field_validator("sha256")
    @classmethod
    def _hex_digest(cls, value: str) -> str:
        # The digest names the cache file: it must never be a path (../x, /etc/x).
        if not is_sha256_hex(value):
            raise PydanticCustomError("sha256_format", "expected 64 lower-case hex digits")
        return value


def catalog_dir(override: Path | None = None) -> Path | None:
    """An explicit catalog directory (argument, then $INFERLAB_CATALOG_DIR), else None."""
    if override is not None:
        return override
    env = os.environ.get(CATALOG_DIR_ENV)
    return Path(env) if env else None


def load_entry(dataset: str, directory: Path | None = None) -> CatalogEntry:
    """Read ``<dataset>.json`` from ``directory`` or from the packaged datasets_catalog."""
    where = catalog_dir(directory)
    try:
        if where is None:
            raw = resources.files("datasets_catalog").joinpath(f"{dataset}.json").read_bytes()
            label = f"datasets_catalog/{dataset}.json"
        else:
            raw = (where / f"{dataset}.json").read_bytes()
            label = str(where / f"{dataset}.json")
    except (OSError, ModuleNotFoundError) as exc:
        raise DatasetError(f"catalog: no entry for dataset {dataset!r} ({exc})") from exc
    try:
        return CatalogEntry.model_validate_json(raw)
    except ValidationError as exc:
        raise DatasetError(
            f"{label}: invalid catalog entry: {describe_validation_error(exc)}"
        ) from exc


def check_request_catalog(requested: BenchDatasetCatalogInput, entry: CatalogEntry) -> None:
    """Every catalogued fact in the request must equal the release catalog's."""
    for field in COMPARED_FIELDS:
        asked, known = getattr(requested, field), getattr(entry, field)
        if field == "materialization_identity" and asked in EXTENSION_MATERIALIZATIONS.get(
            known, ()
        ):
            continue
        if asked != known:
            raise CatalogMismatchError(field, asked, known)

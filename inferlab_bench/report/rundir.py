"""The saved layout of a human run: ``request.json`` + ``result.json`` (+ artifacts) per case."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from inferlab_bench.errors import RequestError
from inferlab_bench.layout import (
    REQUEST_FILE,
    RESULT_FILE,
    TRIALS_FILE,
    VALIDITY_FILE,
)
from inferlab_bench.protocol import (
    BenchClientRequest,
    BenchClientResult,
    ModelT,
    describe_validation_error,
    parse_request,
)
from inferlab_bench.validity.report import VALIDITY_SCHEMA, ValidityDocument
from inferlab_bench.validity.trials import MetricSummary

_HINT = "pass a run directory written by `inferlab-bench run`, or repair or remove the file"


@dataclass(frozen=True)
class SavedCase:
    """One case as saved on disk: its result, and its request and validity when present."""

    directory: Path
    result: BenchClientResult
    request: BenchClientRequest | None
    validity: dict[str, Any] | None

    @property
    def label(self) -> str:
        return self.directory.name


def load_case(path: Path, inside: Path | None = None) -> SavedCase:
    """Load a case from its directory or from its ``result.json`` path (refused when it
    resolves outside ``inside``, for a folder someone else made)."""
    if inside is not None and not path.resolve().is_relative_to(inside.resolve()):
        raise RequestError(
            f"{path}: resolves outside {inside}; a saved folder's cases stay inside it",
            hint="a link or a '..' in the folder points elsewhere; remove it",
        )
    result_path = path if path.is_file() else path / RESULT_FILE
    directory = result_path.parent
    result = _parse(BenchClientResult, result_path)
    request_path = directory / REQUEST_FILE
    request = _parse(BenchClientRequest, request_path) if request_path.is_file() else None
    # A result's own artifact list may point anywhere: followed only for a case the user named.
    elsewhere = [] if inside is not None else [a.path for a in result.raw_artifacts]
    return SavedCase(directory, result, request, _validity(directory, elsewhere))


def load_trials(path: Path) -> tuple[SavedCase, ...]:
    """The cases behind ``path``: the succeeded trials of a ``run --trials`` folder, or one."""
    listing = _trials_listing(path)
    if listing is None:
        return (load_case(path),)
    listing_file = path / TRIALS_FILE
    names = listing.get("succeeded")
    if not isinstance(names, list) or not names:
        raise RequestError(
            f"{path / TRIALS_FILE}: no succeeded trials listed",
            hint="compare needs at least one successful trial on each side",
        )
    return tuple(load_case(path / _trial_name(listing_file, name), inside=path) for name in names)


def trial_summaries(path: Path) -> tuple[MetricSummary, ...]:
    """The means and confidence intervals a ``run --trials`` folder saved (none elsewhere)."""
    listing = _trials_listing(path)
    if listing is None:
        return ()
    summaries = listing.get("summaries") or ()
    try:
        return tuple(MetricSummary.model_validate(s) for s in summaries)
    except (ValidationError, TypeError) as exc:
        found = describe_validation_error(exc, limit=1) if isinstance(exc, ValidationError) else exc
        raise RequestError(
            f"{path / TRIALS_FILE}: summaries are not what `run --trials` writes ({found})",
            hint=_HINT,
        ) from exc


def _trials_listing(path: Path) -> dict[str, Any] | None:
    """``trials.json`` of a ``run --trials`` folder; None when ``path`` is not one."""
    listing_path = path / TRIALS_FILE
    if not listing_path.is_file():
        return None
    listing = _json(listing_path)
    if not isinstance(listing, dict):
        raise RequestError(f"{listing_path}: expected a JSON object", hint=_HINT)
    return listing


def find_cases(root: Path) -> list[SavedCase]:
    """Every saved case under ``root`` (itself or its sub-directories), in path order."""
    if (root / RESULT_FILE).is_file():
        return [load_case(root)]
    return [load_case(p.parent, inside=root) for p in sorted(root.glob(f"*/{RESULT_FILE}"))]


def _trial_name(listing: Path, name: object) -> str:
    """A trial listed in trials.json: a plain folder name beside it, nothing else."""
    text = str(name)
    if not text or text in (".", "..") or "/" in text or "\\" in text or "\x00" in text:
        raise RequestError(
            f"{listing}: trial {text!r} is not a folder name beside it",
            hint="trials.json lists trial folders such as trial-01; this one was edited",
        )
    return text


def _validity(directory: Path, artifacts: list[Path]) -> dict[str, Any] | None:
    candidates = [directory / VALIDITY_FILE] + [p for p in artifacts if p.name == VALIDITY_FILE]
    candidate = next((c for c in candidates if c.is_file()), None)
    if candidate is None:
        return None
    loaded = _json(candidate)
    if not isinstance(loaded, dict) or not isinstance(loaded.get("verdicts", {}), dict):
        raise RequestError(f"{candidate}: expected a validity document (a JSON object)", hint=_HINT)
    if loaded.get("schema_name") == VALIDITY_SCHEMA:
        try:
            ValidityDocument.model_validate(loaded)
        except ValidationError as exc:
            raise RequestError(
                f"{candidate}: not a valid {VALIDITY_SCHEMA} document: "
                f"{describe_validation_error(exc, limit=1)}",
                hint=_HINT,
            ) from exc
    return loaded


def _parse(model: type[ModelT], path: Path) -> ModelT:
    data = _read(path)
    try:
        return parse_request(model, data)
    except RequestError as exc:
        raise RequestError(f"{path}: {exc.message}", hint=_HINT) from exc


def _json(path: Path) -> Any:
    try:
        return orjson.loads(_read(path))
    except orjson.JSONDecodeError as exc:
        raise RequestError(f"{path}: not valid JSON ({exc})", hint=_HINT) from exc


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RequestError(
            f"{path}: cannot read saved result ({exc.strerror or exc})", hint=_HINT
        ) from exc

"""The saved layout of a human run: ``request.json`` + ``result.json`` (+ artifacts) per case."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.errors import RequestError
from inferlab_bench.layout import (
    REQUEST_FILE,
    RESULT_FILE,
    TRIALS_FILE,
    VALIDITY_FILE,
)
from inferlab_bench.protocol import BenchClientRequest, BenchClientResult, parse_request
from inferlab_bench.validity.trials import MetricSummary


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


def load_case(path: Path) -> SavedCase:
    """Load a case from its directory or from its ``result.json`` path."""
    result_path = path if path.is_file() else path / RESULT_FILE
    directory = result_path.parent
    result = parse_request(BenchClientResult, _read(result_path))
    request_path = directory / REQUEST_FILE
    request = (
        parse_request(BenchClientRequest, _read(request_path)) if request_path.is_file() else None
    )
    return SavedCase(directory, result, request, _validity(result, directory))


def load_trials(path: Path) -> tuple[SavedCase, ...]:
    """The cases behind ``path``: the succeeded trials of a ``run --trials`` folder, or one."""
    listing = _trials_listing(path)
    if listing is None:
        return (load_case(path),)
    names = listing.get("succeeded")
    if not isinstance(names, list) or not names:
        raise RequestError(
            f"{path / TRIALS_FILE}: no succeeded trials listed",
            hint="compare needs at least one successful trial on each side",
        )
    return tuple(load_case(path / str(name)) for name in names)


def trial_summaries(path: Path) -> tuple[MetricSummary, ...]:
    """The means and confidence intervals a ``run --trials`` folder saved (none elsewhere)."""
    listing = _trials_listing(path)
    if listing is None:
        return ()
    return tuple(MetricSummary.model_validate(s) for s in listing.get("summaries") or ())


def _trials_listing(path: Path) -> dict[str, Any] | None:
    """``trials.json`` of a ``run --trials`` folder; None when ``path`` is not one."""
    listing_path = path / TRIALS_FILE
    if not listing_path.is_file():
        return None
    listing = orjson.loads(_read(listing_path))
    return listing if isinstance(listing, dict) else {}


def find_cases(root: Path) -> list[SavedCase]:
    """Every saved case under ``root`` (itself or its sub-directories), in path order."""
    if (root / RESULT_FILE).is_file():
        return [load_case(root)]
    return [load_case(p.parent) for p in sorted(root.glob(f"*/{RESULT_FILE}"))]


def _validity(result: BenchClientResult, directory: Path) -> dict[str, Any] | None:
    # The folder's own file first: a copied or moved folder must not read the original's.
    candidates = [directory / VALIDITY_FILE]
    candidates += [a.path for a in result.raw_artifacts if a.path.name == VALIDITY_FILE]
    for candidate in candidates:
        if candidate.is_file():
            loaded: dict[str, Any] = orjson.loads(candidate.read_bytes())
            return loaded
    return None


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RequestError(
            f"{path}: cannot read saved result ({exc.strerror or exc})",
            hint="pass a run directory written by `inferlab-bench run` or its result.json",
        ) from exc

"""What a bundle holds: the cases of a run or sweep directory, its population, its setup facts."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.errors import BundleError
from inferlab_bench.layout import (
    EVIDENCE_FILE,
    POPULATION_FILE,
    RECORDS_PARQUET,
    REQUEST_FILE,
    RESET_EVIDENCE_FILE,
    RESULT_FILE,
    SWEEP_FILE,
    TRIALS_FILE,
    VALIDITY_FILE,
)
from inferlab_bench.protocol import BenchClientRequest, parse_request
from inferlab_bench.versions import handshake_facts

INDEX_FILE = "BUNDLE.json"
RUN_PREFIX = "run"
POPULATION_PREFIX = "population"
REPORT_FILE = "report.html"
BUNDLE_SCHEMA = "inferlab-bundle-v1"
PREPARATION_FILES = (
    POPULATION_FILE,
    EVIDENCE_FILE,
    "population.sha256",
    "preparation-manifest.json",
    "prepare-request.json",
    "prepare-result.json",
    "dataset.json",
)
TRIAL_FILES = (REQUEST_FILE, RESULT_FILE, VALIDITY_FILE, RESET_EVIDENCE_FILE)


@dataclass(frozen=True)
class CaseGroup:
    """One case of the run: its directory and its trial directories (itself when one trial)."""

    directory: Path
    trials: tuple[Path, ...]


def case_groups(root: Path) -> list[CaseGroup]:
    """The cases under a run or sweep directory, each with its trials, in path order."""
    found = _group(root)
    if found is not None:
        return [found]
    groups = [g for child in sorted(root.iterdir()) if (g := _group(child)) is not None]
    if not groups:
        raise BundleError(
            f"{root}: no result.json or trials.json here or one level below",
            hint="bundle the --out directory of `inferlab-bench run` or `sweep`",
        )
    return groups


def _group(directory: Path) -> CaseGroup | None:
    if not directory.is_dir():
        return None
    listing = directory / TRIALS_FILE
    if listing.is_file():
        names = _json(listing).get("trials") or []
        if not isinstance(names, list) or not all(_plain_name(n) for n in names):
            raise BundleError(
                f"{listing}: trials must list folder names beside it (found {str(names)[:80]})",
                hint="trials.json lists trial folders such as trial-01; this one was edited",
            )
        trials = tuple(directory / n for n in names if (directory / n / RESULT_FILE).is_file())
        return CaseGroup(directory, trials) if trials else None
    if (directory / RESULT_FILE).is_file():
        return CaseGroup(directory, (directory,))
    return None


def _plain_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and not any(c in name for c in "/\\\x00")
    )


def run_files(root: Path, groups: list[CaseGroup], records: bool) -> dict[str, Path]:
    """Archive name -> file on disk, for every case file that goes in."""
    names = (*TRIAL_FILES, RECORDS_PARQUET) if records else TRIAL_FILES
    files: dict[str, Path] = {}
    if (root / SWEEP_FILE).is_file():
        files[f"{RUN_PREFIX}/{SWEEP_FILE}"] = root / SWEEP_FILE
    for group in groups:
        if (group.directory / TRIALS_FILE).is_file():
            files[archive_name(root, group.directory / TRIALS_FILE)] = group.directory / TRIALS_FILE
        for trial in group.trials:
            for name in names:
                if (trial / name).is_file():
                    files[archive_name(root, trial / name)] = trial / name
    return files


def archive_name(root: Path, path: Path) -> str:
    relative = path.relative_to(root).as_posix()
    return f"{RUN_PREFIX}/{relative}"


def first_request(group: CaseGroup) -> BenchClientRequest:
    path = group.trials[0] / REQUEST_FILE
    if not path.is_file():
        raise BundleError(
            f"{group.trials[0]}: no {REQUEST_FILE}",
            hint="a bundle needs each case's request to be reproducible",
        )
    return parse_request(BenchClientRequest, path.read_bytes())


def population_dir(requests: list[BenchClientRequest]) -> Path | None:
    """The one population directory every case used (None for synthetic prompts)."""
    digests = {r.population.sha256 for r in requests if r.population is not None}
    if len(digests) > 1:
        raise BundleError(
            f"the cases use {len(digests)} different populations ({', '.join(sorted(digests))})",
            hint="bundle one run or sweep on one frozen population",
        )
    populated = [r.population for r in requests if r.population is not None]
    return populated[0].path.parent if populated else None


def population_files(directory: Path) -> dict[str, Path]:
    return {
        f"{POPULATION_PREFIX}/{name}": directory / name
        for name in PREPARATION_FILES
        if (directory / name).is_file()
    }


def preparation_inputs(directory: Path) -> dict[str, Any] | None:
    """The inputs that made the population: dataset, tokenizer, template kwargs, seed, sizes."""
    request_path = directory / "prepare-request.json"
    manifest_path = directory / "preparation-manifest.json"
    if not request_path.is_file() or not manifest_path.is_file():
        return None
    request, manifest = _json(request_path), _json(manifest_path)
    source = request.get("request_source") or {}
    catalog = source.get("catalog") or {}
    return {
        "dataset": source.get("dataset"),
        "upstream_identity": catalog.get("upstream_identity"),
        "source_sha256": manifest.get("source_sha256"),
        "tokenizer_locator": manifest.get("tokenizer_locator"),
        "tokenizer_fingerprint": manifest.get("tokenizer_fingerprint"),
        "chat_template_kwargs": (request.get("request_body") or {}).get("chat_template_kwargs"),
        "materialization_identity": manifest.get("materialization_identity"),
        "seed": request.get("seed"),
        "required_entries": request.get("required_entries"),
        "max_input_tokens": source.get("max_input_tokens"),
        "output_tokens": source.get("output_tokens"),
        "population_sha256": manifest.get("population_sha256"),
        "versions": manifest.get("versions"),
    }


def reset_method(trial: Path) -> str | None:
    """``METHOD:/path`` of the prefix-cache reset the case made (from its evidence)."""
    path = trial / RESET_EVIDENCE_FILE
    if not path.is_file():
        return None
    target = _json(path).get("target")
    if not isinstance(target, dict) or "method" not in target or "path" not in target:
        return None
    return f"{target['method']}:{target['path']}"


def machine_facts() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }


def version_facts() -> dict[str, Any]:
    return {
        **handshake_facts(),
        "server_version": None,  # servers do not report one on the routes a case uses
    }


def _json(path: Path) -> dict[str, Any]:
    try:
        loaded = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise BundleError(f"{path}: cannot read as JSON ({exc})") from exc
    if not isinstance(loaded, dict):
        raise BundleError(f"{path}: expected a JSON object")
    return loaded

"""``bundle``: one self-describing, deterministic .tar.gz of a run or sweep (BUNDLE.json index)."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.atomic import atomic_writer
from inferlab_bench.errors import BundleError
from inferlab_bench.layout import POPULATION_FILE
from inferlab_bench.publish.contents import (
    BUNDLE_SCHEMA,
    INDEX_FILE,
    POPULATION_PREFIX,
    REPORT_FILE,
    RUN_PREFIX,
    archive_name,
    case_groups,
    first_request,
    machine_facts,
    population_dir,
    population_files,
    preparation_inputs,
    reset_method,
    run_files,
    version_facts,
)
from inferlab_bench.publish.html import build_page
from inferlab_bench.report.tables import load_label


@dataclass(frozen=True)
class BundleOutcome:
    path: Path
    index: dict[str, Any]


def write_bundle(root: Path, out: Path, *, records: bool = True) -> BundleOutcome:
    """Archive the run or sweep at ``root`` into ``out`` (written atomically)."""
    if out.resolve().is_relative_to(root.resolve()):
        raise BundleError(
            f"--out {out}: inside the folder being bundled ({root}); the archive would "
            "replace or join the run's own files",
            hint="write the bundle beside the run, e.g. --out run.tar.gz",
        )
    groups = case_groups(root)
    requests = [first_request(g) for g in groups]
    files = run_files(root, groups, records)
    population = population_dir(requests)
    if population is not None:
        files.update(population_files(population))
    members = {name: _read(path) for name, path in sorted(files.items())}
    members[REPORT_FILE] = build_page(root).encode()
    if population is not None:
        _check_population(population, members, requests)
    cases = [
        {
            "path": _case_path(root, g.directory),
            "label": load_label(r),
            "trials": [_case_path(root, t) for t in g.trials],
            "reset": reset_method(g.trials[0]),
        }
        for g, r in zip(groups, requests, strict=True)
    ]
    index = {
        "schema_name": BUNDLE_SCHEMA,
        "schema_version": 1,
        "source": root.resolve().name,
        "records": records,
        "versions": version_facts(),
        "machine": machine_facts(),
        "cases": cases,
        "population": None if population is None else _population_entry(requests, population),
        "members": [
            {"path": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
            for name, data in sorted(members.items())
        ],
    }
    blob = orjson.dumps(index, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    with atomic_writer(out) as handle:
        _write_tar(handle, {INDEX_FILE: blob, **members})
    return BundleOutcome(out, index)


def _case_path(root: Path, directory: Path) -> str:
    return RUN_PREFIX if directory == root else archive_name(root, directory)


def _population_entry(requests: list[Any], directory: Path) -> dict[str, Any]:
    facts = next(r.population for r in requests if r.population is not None)
    return {
        "path": f"{POPULATION_PREFIX}/{POPULATION_FILE}",
        "sha256": facts.sha256,
        "entries": facts.entries,
        "preparation": preparation_inputs(directory),
    }


def _check_population(directory: Path, members: dict[str, bytes], requests: list[Any]) -> None:
    name = f"{POPULATION_PREFIX}/{POPULATION_FILE}"
    if name not in members:
        raise BundleError(f"{directory / POPULATION_FILE}: the cases' population file is gone")
    actual = hashlib.sha256(members[name]).hexdigest()
    expected = next(r.population.sha256 for r in requests if r.population is not None)
    if actual != expected:
        raise BundleError(
            f"{directory / POPULATION_FILE}: sha256 {actual} differs from the {expected} "
            "the cases ran with",
            hint="the population changed after the run; re-run on a frozen population",
        )


def _write_tar(handle: Any, members: dict[str, bytes]) -> None:
    """Plain files only, fixed owner, mode and time: the same inputs give the same bytes."""
    with (
        gzip.GzipFile(fileobj=handle, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BundleError(f"{path}: cannot read ({exc.strerror or exc})") from exc

"""Preparation for people: pick the dataset (catalogued ShareGPT or a local file), save request
and result beside the population so later runs know where it came from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.prepare.cache import cached_path, file_sha256
from inferlab_bench.prepare.catalog import CatalogEntry, load_entry
from inferlab_bench.prepare.sharegpt import detect_format
from inferlab_bench.prepare.stage import run_prepare
from inferlab_bench.progress import NULL_PROGRESS, ProgressSink
from inferlab_bench.protocol import (
    BenchDatasetCacheState,
    BenchDatasetCatalogInput,
    BenchDatasetInput,
    BenchDatasetPreparationRequest,
    BenchDatasetPreparationResult,
    DatasetSource,
    MeasurementModelInput,
    RequestBody,
    dump_json,
)

PREPARE_REQUEST_FILE = "prepare-request.json"
PREPARE_RESULT_FILE = "prepare-result.json"
DEMO_SAMPLE = Path(__file__).with_name("sharegpt-demo-sample.json")


@dataclass(frozen=True)
class DatasetChoice:
    """Which bytes preparation reads, under which catalog entry, and what to tell people."""

    entry: CatalogEntry
    source_path: Path
    catalog_dir: Path | None
    note: str


def catalogued_sharegpt() -> DatasetChoice:
    entry = load_entry("sharegpt")
    return DatasetChoice(
        entry,
        cached_path(entry.sha256),
        None,
        "ShareGPT V3 (catalogued; downloaded and verified if not cached)",
    )


def local_file(path: Path, catalog_dir: Path, note: str | None = None) -> DatasetChoice:
    """A ShareGPT-format file of one's own: catalogued under its own sha256 in ``catalog_dir``."""
    sha = file_sha256(path)
    with path.open("rb") as handle:
        fmt = detect_format(handle.read(64))
    entry = CatalogEntry(
        dataset="sharegpt",
        upstream_identity=f"local:{path.resolve()}",
        url=path.resolve().as_uri(),
        sha256=sha,
        source_format="sharegpt-json-array-v1" if fmt == "json-array" else "sharegpt-jsonl-v1",
        license="unknown (local file)",
        materialization_identity="sharegpt-single-request-v1",
    )
    write_bytes_atomic(catalog_dir / "sharegpt.json", entry.model_dump_json(indent=2).encode())
    return DatasetChoice(
        entry, path.resolve(), catalog_dir, note or f"local file {path} (sha256 {sha[:12]}...)"
    )


def demo_dataset(catalog_dir: Path) -> DatasetChoice:
    """The real ShareGPT file if it is already cached, else the small sample we ship."""
    real = catalogued_sharegpt()
    if real.source_path.is_file():
        return real
    return local_file(
        DEMO_SAMPLE,
        catalog_dir,
        "a small synthetic ShareGPT-format sample shipped with "
        "inferlab-bench (the real ShareGPT file is not cached; `inferlab-bench dataset "
        "fetch sharegpt` gets it)",
    )


def preparation_request(
    choice: DatasetChoice,
    locator: str,
    served_name: str,
    *,
    required: int,
    max_input_tokens: int,
    output_tokens: int | None,
    seed: int,
    out: Path,
    request_body: RequestBody | None = None,
    materialization: str | None = None,
) -> BenchDatasetPreparationRequest:
    """The v6 request; ``materialization`` names one of our extensions of the entry's
    (``catalog.EXTENSION_MATERIALIZATIONS``), e.g. a conversation population."""
    entry = choice.entry
    cache = cached_path(entry.sha256)
    catalog = BenchDatasetCatalogInput(
        upstream_identity=entry.upstream_identity,
        url=entry.url,
        sha256=entry.sha256,
        source_format=entry.source_format,
        license=entry.license,
        cache_path=cache,
        cache_state=BenchDatasetCacheState.PRESENT
        if cache.is_file()
        else BenchDatasetCacheState.MISSING,
        materialization_identity=materialization or entry.materialization_identity,
    )
    source = DatasetSource(
        kind="dataset",
        dataset=BenchDatasetInput.SHAREGPT,
        max_input_tokens=max_input_tokens,
        output_tokens=output_tokens,
        catalog=catalog,
    )
    return BenchDatasetPreparationRequest(
        protocol_version="6",
        model=MeasurementModelInput(locator=locator, served_name=served_name),
        request_source=source,
        source_path=choice.source_path,
        required_entries=required,
        seed=seed,
        request_body=request_body or {},
        artifact_dir=out.resolve(),
    )


def prepare_and_save(
    request: BenchDatasetPreparationRequest,
    choice: DatasetChoice,
    progress: ProgressSink = NULL_PROGRESS,
) -> BenchDatasetPreparationResult:
    """Run preparation and keep its request and result beside the population."""
    out = request.artifact_dir
    write_bytes_atomic(out / PREPARE_REQUEST_FILE, dump_json(request))
    result = run_prepare(request, progress=progress, catalog_dir=choice.catalog_dir)
    write_bytes_atomic(out / PREPARE_RESULT_FILE, dump_json(result))
    write_bytes_atomic(
        out / "dataset.json", orjson.dumps({"note": choice.note, "sha256": choice.entry.sha256})
    )
    return result

"""``reproduce --reprepare``: rebuild a bundle's population from its recorded inputs, or refuse
naming the input that differs (tokenizer, dataset digest, template kwargs, seed, sizes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.errors import ReproductionError
from inferlab_bench.prepare.catalog import load_entry
from inferlab_bench.prepare.tokens import fingerprint
from inferlab_bench.protocol import (
    BenchDatasetPreparationRequest,
    ClientStatus,
    DatasetSource,
    parse_request,
)
from inferlab_bench.publish.archive import Bundle
from inferlab_bench.runs.prepare import (
    DatasetChoice,
    catalogued_sharegpt,
    local_file,
    preparation_request,
    prepare_and_save,
)

REPREPARED_DIR = "population"
_MANIFEST = "preparation-manifest.json"
_HINT = "reproduce without --reprepare to use the bundle's own population"


def reprepare(bundle: Bundle, tokenizer: Path, dataset: Path | None, out: Path) -> Path:
    """Prepare again into ``out/population`` and return the population file when its sha256
    is the bundle's; otherwise raise ``ReproductionError`` naming the differing input."""
    entry = bundle.index["population"]
    recorded = _recorded_request(bundle, entry["path"])
    published_manifest = _json(bundle.members.get(_sibling(entry["path"], _MANIFEST), b"{}"))
    here = fingerprint(str(tokenizer))
    if published_manifest.get("tokenizer_fingerprint") not in (None, here):
        raise ReproductionError(
            f"--reprepare: tokenizer differs: --tokenizer {tokenizer} has fingerprint {here}, "
            f"the population was made with {published_manifest['tokenizer_fingerprint']} "
            f"({published_manifest.get('tokenizer_locator')})",
            hint=f"use the publisher's tokenizer files; or {_HINT}",
        )
    choice = _dataset(recorded, dataset, out)
    expected_source = published_manifest.get("source_sha256")
    if expected_source not in (None, choice.entry.sha256):
        raise ReproductionError(
            f"--reprepare: dataset digest differs: {choice.source_path} is sha256 "
            f"{choice.entry.sha256}, the population was made from {expected_source}",
            hint=f"pass --dataset with the published file; or {_HINT}",
        )
    source = recorded.request_source
    assert isinstance(source, DatasetSource)  # _recorded_request checked it
    request = preparation_request(
        choice,
        str(tokenizer.resolve()),
        recorded.model.served_name,
        required=recorded.required_entries,
        max_input_tokens=source.max_input_tokens,
        output_tokens=source.output_tokens,
        seed=recorded.seed,
        out=out / REPREPARED_DIR,
        request_body=recorded.request_body,
        materialization=source.catalog.materialization_identity,  # a conversation population
    )
    result = prepare_and_save(request, choice)
    if result.status is ClientStatus.FAILED or result.population is None:
        raise ReproductionError(f"--reprepare: preparation failed: {result.error}", hint=_HINT)
    if result.population.sha256 != entry["sha256"]:
        new_manifest = _json((out / REPREPARED_DIR / _MANIFEST).read_bytes())
        raise ReproductionError(
            f"--reprepare: population sha256 {result.population.sha256} differs from the "
            f"bundle's {entry['sha256']}: {_why(published_manifest, new_manifest)}",
            hint=_HINT,
        )
    return Path(result.population.path)


def _why(published: dict[str, Any], rebuilt: dict[str, Any]) -> str:
    """The recorded inputs that differ between the two manifests, or the versions if none."""
    names = (
        "tokenizer_fingerprint",
        "source_sha256",
        "seed",
        "required_entries",
        "materialization_identity",
    )
    found = [
        f"{name} differs (published {published.get(name)!r}, here {rebuilt.get(name)!r})"
        for name in names
        if published.get(name) != rebuilt.get(name)
    ]
    if not found:
        versions = (published.get("versions"), rebuilt.get("versions"))
        found.append(
            f"every recorded input matches; versions published {versions[0]}, here {versions[1]}"
        )
    return "; ".join(found)


def _recorded_request(bundle: Bundle, population: str) -> BenchDatasetPreparationRequest:
    name = _sibling(population, "prepare-request.json")
    if name not in bundle.members:
        raise ReproductionError(
            f"--reprepare: the bundle has no {name} (the inputs of its population)", hint=_HINT
        )
    request = parse_request(BenchDatasetPreparationRequest, bundle.members[name])
    if not isinstance(request.request_source, DatasetSource):
        raise ReproductionError(f"--reprepare: {name} does not describe a dataset source")
    return request


def _dataset(
    recorded: BenchDatasetPreparationRequest, given: Path | None, out: Path
) -> DatasetChoice:
    """The dataset bytes to prepare from: --dataset, else the catalogued one, else the
    publisher's own path when it exists here."""
    catalog_dir = out / REPREPARED_DIR / "catalog"
    if given is not None:
        return local_file(given, catalog_dir)
    source = recorded.request_source
    assert isinstance(source, DatasetSource)
    if source.catalog.upstream_identity == load_entry("sharegpt").upstream_identity:
        return catalogued_sharegpt()
    if recorded.source_path is not None and recorded.source_path.is_file():
        return local_file(recorded.source_path, catalog_dir)
    raise ReproductionError(
        f"--reprepare: dataset {source.catalog.upstream_identity} is not here",
        hint="pass --dataset PATH (the file the publisher prepared from)",
    )


def _sibling(path: str, name: str) -> str:
    return f"{path.rsplit('/', 1)[0]}/{name}"


def _json(blob: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(blob)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}

"""Acquisition from a local HTTP server: download, verified reuse, mismatch, dropped body."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from inferlab_bench.prepare.cache import cached_path
from inferlab_bench.prepare.stage import run_prepare
from tests.conftest import SchemaCheck
from tests.prepare.conftest import convo, prep_request, write_catalog

BODY = json.dumps(
    [convo("a question here", "an answer here"), convo("b question", "b answer two")]
).encode()
SHA = hashlib.sha256(BODY).hexdigest()


def cache_files(cache: Path) -> list[str]:
    directory = cache / "inferlab" / "datasets" / "sha256"
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def test_download_then_reuse_without_network(
    tmp_path: Path, file_server: Any, isolated_cache: Path
) -> None:
    server = file_server(BODY)
    catalog = write_catalog(tmp_path / "catalog", SHA, server.url)
    missing = tmp_path / "not-here.json"
    first = run_prepare(prep_request(missing, catalog, tmp_path / "a"), catalog_dir=catalog)
    assert first.status.value == "succeeded", first.error
    assert server.hits == 1 and cache_files(isolated_cache) == [SHA]
    assert cached_path(SHA).read_bytes() == BODY
    server.stop()
    second = run_prepare(prep_request(missing, catalog, tmp_path / "b"), catalog_dir=catalog)
    assert second.status.value == "succeeded", second.error
    assert (
        second.population
        and first.population
        and second.population.sha256 == first.population.sha256
    )
    manifest = json.loads((tmp_path / "b" / "preparation-manifest.json").read_text())
    assert manifest["source_origin"] == "cache"


def test_hash_mismatch_leaves_nothing_in_the_cache(
    tmp_path: Path, file_server: Any, isolated_cache: Path
) -> None:
    server = file_server(BODY + b" ")
    catalog = write_catalog(tmp_path / "catalog", SHA, server.url)
    result = run_prepare(
        prep_request(tmp_path / "none", catalog, tmp_path / "o"), catalog_dir=catalog
    )
    assert result.status.value == "failed"
    assert f"expected {SHA}" in (result.error or "") and "sha256 mismatch" in (result.error or "")
    assert cache_files(isolated_cache) == []
    assert not (tmp_path / "o" / "population.jsonl").exists()


def test_connection_dropped_mid_body(
    tmp_path: Path, file_server: Any, isolated_cache: Path
) -> None:
    server = file_server(BODY, drop_after=len(BODY) // 2)
    catalog = write_catalog(tmp_path / "catalog", SHA, server.url)
    result = run_prepare(
        prep_request(tmp_path / "none", catalog, tmp_path / "o"), catalog_dir=catalog
    )
    assert result.status.value == "failed"
    assert "download of" in (result.error or "")
    assert cache_files(isolated_cache) == []


def test_http_error_status(tmp_path: Path, isolated_cache: Path) -> None:
    catalog = write_catalog(tmp_path / "catalog", SHA, "http://127.0.0.1:9/refused")
    result = run_prepare(
        prep_request(tmp_path / "none", catalog, tmp_path / "o"), catalog_dir=catalog
    )
    assert result.status.value == "failed" and "download of http://127.0.0.1:9/refused" in (
        result.error or ""
    )


def test_corrupt_cache_entry_is_replaced_by_a_fresh_download(
    tmp_path: Path, file_server: Any, isolated_cache: Path
) -> None:
    server = file_server(BODY)
    catalog = write_catalog(tmp_path / "catalog", SHA, server.url)
    cached_path(SHA).parent.mkdir(parents=True)
    cached_path(SHA).write_bytes(b"garbage")
    result = run_prepare(
        prep_request(tmp_path / "none", catalog, tmp_path / "o"), catalog_dir=catalog
    )
    assert result.status.value == "succeeded", result.error
    assert cached_path(SHA).read_bytes() == BODY and server.hits == 1


def test_source_path_with_wrong_digest_is_refused_naming_both_digests(
    tmp_path: Path, file_server: Any
) -> None:
    server = file_server(BODY)
    catalog = write_catalog(tmp_path / "catalog", SHA, server.url)
    wrong = tmp_path / "wrong.json"
    wrong.write_bytes(b"[]")
    result = run_prepare(prep_request(wrong, catalog, tmp_path / "o"), catalog_dir=catalog)
    assert result.status.value == "failed" and server.hits == 0  # no download behind its back
    actual = hashlib.sha256(b"[]").hexdigest()
    assert f"source_path {wrong}: sha256 mismatch, expected {SHA}, got {actual}" in (
        result.error or ""
    )
    assert wrong.read_bytes() == b"[]"  # the caller's file is left alone


def test_catalog_mismatch_names_both_values(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path / "catalog", SHA, "http://127.0.0.1:9/x")
    request = prep_request(tmp_path / "x", catalog, tmp_path / "o")
    other = write_catalog(tmp_path / "other", "0" * 64, "http://127.0.0.1:9/x")
    result = run_prepare(request, catalog_dir=other)
    assert result.status.value == "failed"
    assert f"catalog.sha256: request has '{SHA}'" in (result.error or "")
    assert "'" + "0" * 64 + "'" in (result.error or "")


def test_packaged_catalog_rejects_a_foreign_request(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path / "catalog", SHA, "http://127.0.0.1:9/x")
    result = run_prepare(prep_request(tmp_path / "x", catalog, tmp_path / "o"))
    assert result.status.value == "failed" and "datasets_catalog/ has" in (result.error or "")


def test_json_mode_cli_end_to_end(
    tmp_path: Path, file_server: Any, isolated_cache: Path, check_v6: SchemaCheck
) -> None:
    server = file_server(BODY)
    catalog = write_catalog(tmp_path / "catalog", SHA, server.url)
    request = prep_request(tmp_path / "none", catalog, tmp_path / "o")
    req_path = tmp_path / "req.json"
    req_path.write_text(request.model_dump_json())
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "inferlab_bench",
            "prepare",
            "--input",
            str(req_path),
            "--output",
            str(out),
            "--catalog-dir",
            str(catalog),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**__import__("os").environ, "XDG_CACHE_HOME": str(isolated_cache)},
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    check_v6("BenchDatasetPreparationResult", result)
    assert result["status"] == "succeeded" and result["population"]["entries"] == 2
    assert Path(result["population"]["path"]).is_file()

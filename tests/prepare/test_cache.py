"""The content-addressed cache: a digest is never a path (finding 5)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from inferlab_bench import atomic
from inferlab_bench.cli import main
from inferlab_bench.errors import DatasetError, RequestError
from inferlab_bench.prepare.cache import cached_path
from inferlab_bench.prepare.catalog import load_entry
from inferlab_bench.prepare.stage import run_prepare
from inferlab_bench.protocol import BenchDatasetPreparationRequest, parse_request
from tests.prepare.conftest import catalog_entry, prep_request, write_catalog
from tests.protocol import examples

DIGEST = "35f0e213ce091ed9b9af2a1f0755e9d39f9ccec34ab281cd4ca60d70f6479ba4"


@pytest.mark.parametrize("digest", ["../../../../victim.txt", "/etc/passwd", "", DIGEST.upper()])
def test_cached_path_refuses_anything_but_a_hex_digest(digest: str) -> None:
    with pytest.raises(RequestError, match="catalog.sha256: expected 64 lower-case hex"):
        cached_path(digest)


def test_cached_path_of_a_digest_is_inside_the_cache(isolated_cache: Path) -> None:
    assert cached_path(DIGEST).parent == isolated_cache / "inferlab" / "datasets" / "sha256"


def test_a_catalog_entry_whose_digest_is_a_path_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sharegpt.json").write_text(
        json.dumps({"dataset": "sharegpt", **catalog_entry("/etc/passwd", "http://x")})
    )
    with pytest.raises(DatasetError, match="sha256: expected 64 lower-case hex digits"):
        load_entry("sharegpt", tmp_path)


@pytest.mark.parametrize("as_given", ["absolute", "relative"])
def test_victim_named_by_catalog_sha256_is_neither_hashed_nor_deleted(
    as_given: str,
    tmp_path: Path,
    isolated_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With --catalog-dir and a matching catalog, the victim was deleted as a corrupt entry."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    digest = str(victim) if as_given == "absolute" else "../../../../victim.txt"
    if as_given == "relative":  # from the cache's sha256/ folder, this is the victim too
        (isolated_cache / "inferlab" / "datasets" / "sha256").mkdir(parents=True)
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "sharegpt.json").write_text(
        json.dumps({"dataset": "sharegpt", **catalog_entry(digest, "http://127.0.0.1:9/x")})
    )
    data = examples.prep_request()
    data["request_source"]["catalog"]["sha256"] = digest
    data["artifact_dir"] = str(tmp_path / "out")
    data["source_path"] = str(tmp_path / "absent.json")
    request = tmp_path / "request.json"
    request.write_text(json.dumps(data))
    output = tmp_path / "result.json"
    argv = ["prepare", "--input", str(request), "--output", str(output)]
    assert main([*argv, "--catalog-dir", str(catalog)]) == 0
    result = json.loads(output.read_text())
    assert result["status"] == "failed"
    assert "catalog.sha256: expected 64 lower-case hex digits" in result["error"]
    assert victim.read_text() == "precious\n"
    assert "Traceback" not in capsys.readouterr().err


def test_a_cache_that_cannot_be_written_is_named_not_an_internal_error(
    tmp_path: Path, file_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 8: a read-only cache gave ``internal error: PermissionError``."""
    body = b"[]"
    server = file_server(body)
    catalog = write_catalog(tmp_path / "catalog", hashlib.sha256(body).hexdigest(), server.url)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
    request = prep_request(tmp_path / "absent.json", catalog, tmp_path / "out")
    result = run_prepare(request, catalog_dir=catalog)
    assert result.status.value == "failed"
    assert f"{blocker}/cache/inferlab/datasets/sha256/" in (result.error or "")
    assert "cannot be written (not a directory)" in (result.error or "")


def test_an_unreadable_source_path_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 8: an unreadable ``source_path`` was an internal PermissionError."""
    source = tmp_path / "sharegpt.json"
    source.write_text("[]")
    monkeypatch.setattr(atomic.os, "access", lambda path, mode: False)  # as root, nothing is
    data = examples.prep_request()
    data["source_path"], data["artifact_dir"] = str(source), str(tmp_path / "out")
    with pytest.raises(RequestError) as info:
        parse_request(BenchDatasetPreparationRequest, json.dumps(data), check_paths=True)
    assert f"source_path: {source}: not readable (permission denied)" in str(info.value)

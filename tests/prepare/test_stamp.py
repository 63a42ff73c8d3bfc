"""A source file's digest is trusted from its stamp only while the file is provably unchanged."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from inferlab_bench.prepare import stamp as stamps
from inferlab_bench.prepare.stage import run_prepare
from inferlab_bench.prepare.stamp import Stamp, file_digest
from tests.prepare.conftest import convo, prep_request, write_catalog


@pytest.fixture(autouse=True)
def settled_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The files here were written a moment ago; see the last test for the margin."""
    monkeypatch.setattr(stamps, "SETTLED_NS", -(10**12))


def test_second_read_trusts_the_stamp_and_any_change_rehashes(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_bytes(b"[1, 2, 3]")
    first = file_digest(path)
    assert first.source == "recomputed"
    assert first.sha256 == hashlib.sha256(b"[1, 2, 3]").hexdigest()
    assert file_digest(path) == type(first)(first.sha256, "trusted-stamp")
    before = os.stat(path)
    path.write_bytes(b"[1, 2, 4]")  # same size; then put mtime back as it was
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns  # only ctime tells
    changed = file_digest(path)
    assert changed.source == "recomputed"
    assert changed.sha256 == hashlib.sha256(b"[1, 2, 4]").hexdigest()


def test_replaced_file_is_rehashed(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_bytes(b"[1]")
    file_digest(path)
    other = tmp_path / "other.json"
    other.write_bytes(b"[2]")
    other.replace(path)  # another inode under the same name
    replaced = file_digest(path)
    assert replaced.sha256 == hashlib.sha256(b"[2]").hexdigest()
    assert replaced.source == "recomputed"


def test_damaged_stamp_means_rehash(tmp_path: Path, isolated_cache: Path) -> None:
    path = tmp_path / "data.json"
    path.write_bytes(b"[1]")
    file_digest(path)
    for stamp in (isolated_cache / "inferlab" / "stamps").iterdir():
        stamp.write_text("{not json")
    assert file_digest(path).source == "recomputed"
    assert Stamp.of(path).size == 3


def test_manifest_says_whether_the_digest_was_recomputed_or_trusted(
    tmp_path: Path, dataset: object
) -> None:
    records = [convo("a question here", "an answer with words", id=f"c{i}") for i in range(4)]
    source, catalog = dataset(records)  # type: ignore[operator]
    seen = []
    for name in ("a", "b"):
        result = run_prepare(prep_request(source, catalog, tmp_path / name), catalog_dir=catalog)
        assert result.status.value == "succeeded", result.error
        manifest = json.loads((tmp_path / name / "preparation-manifest.json").read_text())
        seen.append(manifest["source_digest"])
    assert seen == ["recomputed", "trusted-stamp"]
    source.write_text(source.read_text().replace("answer", "answex"))  # same size, new bytes
    write_catalog(catalog, hashlib.sha256(source.read_bytes()).hexdigest(), "http://127.0.0.1:9/")
    result = run_prepare(prep_request(source, catalog, tmp_path / "c"), catalog_dir=catalog)
    assert result.status.value == "succeeded", result.error
    manifest = json.loads((tmp_path / "c" / "preparation-manifest.json").read_text())
    assert manifest["source_digest"] == "recomputed"


def test_a_file_changed_just_before_its_hash_gets_no_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stamps, "SETTLED_NS", 2_000_000_000)
    path = tmp_path / "data.json"
    path.write_bytes(b"[1]")
    assert file_digest(path).source == "recomputed"
    assert file_digest(path).source == "recomputed"  # written < 2 s before: hashed again

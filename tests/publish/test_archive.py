"""Reading a bundle without trusting it: crafted archives with escaping members are refused
naming the member and nothing is written; a damaged or unlisted member is named too."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from inferlab_bench.errors import BundleError
from inferlab_bench.publish.archive import read_bundle, unpack
from inferlab_bench.publish.contents import BUNDLE_SCHEMA
from tests.publish.support import published_bundle
from tests.reliability import bundles as b


def _index(members: dict[str, bytes]) -> bytes:
    listed = [
        {"path": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        for name, data in members.items()
    ]
    return json.dumps(
        {
            "schema_name": BUNDLE_SCHEMA,
            "schema_version": 1,
            "cases": [{"path": "run", "label": "c=1", "trials": ["run"], "reset": None}],
            "population": None,
            "members": listed,
        }
    ).encode()


def _archive(path: Path, files: dict[str, bytes], extra: list[tarfile.TarInfo] = ()) -> Path:  # type: ignore[assignment]
    with tarfile.open(path, "w:gz") as tar:
        for name, data in {"BUNDLE.json": _index(files), **files}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.size = 1 if kind == tarfile.REGTYPE else 0
    return info


@pytest.mark.parametrize(
    ("member", "said"),
    [
        (_member("/tmp/inferlab-escape"), "absolute name"),
        (_member("run/../../escape"), "'..' component"),
        (_member("run/link", tarfile.SYMTYPE, "/etc/passwd"), "is a link"),
        (_member("run/up", tarfile.SYMTYPE, "../../.."), "is a link"),
        (_member("run/hard", tarfile.LNKTYPE, "BUNDLE.json"), "is a link"),
        (_member("run/dev", tarfile.CHRTYPE), "not a plain file"),
        (_member("run/fifo", tarfile.FIFOTYPE), "not a plain file"),
    ],
    ids=["absolute", "dotdot", "symlink-out", "symlink-up", "hardlink", "device", "fifo"],
)
def test_an_escaping_member_is_refused_naming_it(
    tmp_path: Path, member: tarfile.TarInfo, said: str
) -> None:
    crafted = _archive(tmp_path / "crafted.tar.gz", {"run/ok.json": b"{}"}, [member])
    target = tmp_path / "target"
    with pytest.raises(BundleError) as caught:
        read_bundle(crafted)
    assert repr(member.name) in caught.value.message and said in caught.value.message
    assert not target.exists() and not Path("/tmp/inferlab-escape").exists()
    assert not (tmp_path.parent / "escape").exists()


@pytest.fixture(scope="module")
def real_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return published_bundle(tmp_path_factory.getbasetemp())


def test_a_real_bundle_unpacks_only_under_its_target_without_its_page(
    real_bundle: Path, tmp_path: Path
) -> None:
    bundle = read_bundle(real_bundle)
    assert [c.path for c in bundle.cases] == ["run/01-c1", "run/02-c2"]
    assert bundle.recomputed == 2  # both trials' figures recomputed from their records
    root = unpack(bundle, tmp_path / "target")
    written = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert "run/01-c1/result.json" in written and "BUNDLE.json" in written
    assert "report.html" not in written  # a page in a bundle is the publisher's, never ours
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]


def test_a_planted_link_in_the_target_is_not_written_through(
    real_bundle: Path, tmp_path: Path
) -> None:
    bundle = read_bundle(real_bundle)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    (target / "run").symlink_to(outside)
    with pytest.raises(BundleError, match="member run/.* would be written outside"):
        unpack(bundle, target)
    assert list(outside.iterdir()) == []


def test_unlisted_missing_and_corrupt_archives_are_named(tmp_path: Path) -> None:
    path = tmp_path / "b.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in (("BUNDLE.json", _index({"run/a.json": b"{}"})), ("run/b.json", b"{}")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(BundleError, match="member run/b.json is not listed in BUNDLE.json"):
        read_bundle(path)  # refused as it streams by, before the listed one is missed
    missing = tmp_path / "m.tar.gz"
    with tarfile.open(missing, "w:gz") as tar:
        data = _index({"run/a.json": b"{}"})
        info = tarfile.TarInfo("BUNDLE.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(BundleError, match="member run/a.json is listed in BUNDLE.json but missing"):
        read_bundle(missing)
    extra = tmp_path / "extra.tar.gz"
    with tarfile.open(extra, "w:gz") as tar:
        for name, data in (("BUNDLE.json", _index({})), ("run/b.json", b"{}")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(BundleError, match="member run/b.json is not listed in BUNDLE.json"):
        read_bundle(extra)
    truncated = tmp_path / "t.tar.gz"
    truncated.write_bytes(path.read_bytes()[:40])
    with pytest.raises(BundleError, match="not a readable .tar.gz bundle"):
        read_bundle(truncated)
    plain = _archive(tmp_path / "p.tar.gz", {})
    with tarfile.open(plain, "w:gz") as tar:  # an archive without an index
        info = tarfile.TarInfo("run/a.json")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(BundleError, match="the first member is .run/a.json., not BUNDLE.json"):
        read_bundle(plain)


def test_a_trials_folder_case_is_rebuilt_from_its_listing(
    real_bundle: Path, tmp_path: Path
) -> None:
    """run/01-c1 made a ``--trials`` folder: its trials come from its checksummed trials.json."""
    entries = b.read_entries(real_bundle)
    moved = [
        b.Entry(e.name.replace("run/01-c1/", "run/01-c1/trial-01/"), e.data)
        if e.name.startswith("run/01-c1/")
        else e
        for e in entries
    ]
    listing = {"trials": ["trial-01", "trial-02"], "succeeded": ["trial-01"]}
    index = b.index_of(moved)
    for member in index["members"]:
        member["path"] = member["path"].replace("run/01-c1/", "run/01-c1/trial-01/")
    index["cases"][0]["trials"] = ["run/01-c1/trial-01"]
    moved = b.add(
        b.set_index(moved, index), b.Entry("run/01-c1/trials.json", json.dumps(listing).encode())
    )
    bundle = read_bundle(b.write_archive(tmp_path / "trials.tar.gz", moved))
    assert [(c.path, c.trials) for c in bundle.cases] == [
        ("run/01-c1", ("run/01-c1/trial-01",)),  # trial-02 is listed but holds no request
        ("run/02-c2", ("run/02-c2",)),
    ]
    assert bundle.recomputed == 2


def test_a_bundle_without_records_verifies_but_says_nothing_was_recomputed(
    real_bundle: Path, tmp_path: Path
) -> None:
    entries = [e for e in b.read_entries(real_bundle) if not e.name.endswith("records.parquet")]
    index = b.index_of(entries)
    index["members"] = [m for m in index["members"] if not m["path"].endswith("records.parquet")]
    bundle = read_bundle(b.write_archive(tmp_path / "bare.tar.gz", b.set_index(entries, index)))
    assert (bundle.recomputed, bundle.trials) == (0, 2)

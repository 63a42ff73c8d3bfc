"""Reading a bundle without trusting it: member checks, digests against BUNDLE.json, safe unpack.

Nothing is ever extracted by ``tarfile`` itself. Every member must be a plain file or a
directory with a relative name free of ``..``; a link of any kind, a device, an absolute
name or one that climbs out is refused naming the member, before any byte is written.
"""

from __future__ import annotations

import hashlib
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.errors import BundleError
from inferlab_bench.protocol import BenchClientRequest, parse_request
from inferlab_bench.publish.contents import BUNDLE_SCHEMA, INDEX_FILE

MAX_MEMBER_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class Bundle:
    """A bundle read into memory and verified: its index and every member's bytes."""

    path: Path
    index: dict[str, Any]
    members: dict[str, bytes]

    @property
    def cases(self) -> list[dict[str, Any]]:
        cases: list[dict[str, Any]] = self.index["cases"]
        return cases

    def request(self, trial: str) -> BenchClientRequest:
        return parse_request(BenchClientRequest, self.members[f"{trial}/request.json"])


def member_problem(info: tarfile.TarInfo) -> str | None:
    """Why a member may not be unpacked (None when it is a safe file or directory)."""
    name = info.name
    if "\x00" in name or "\\" in name:
        return "has a NUL or backslash in its name"
    pure = PurePosixPath(name)
    if pure.is_absolute():
        return "has an absolute name"
    if ".." in pure.parts:
        return "has a '..' component (it would land outside the target)"
    if info.issym() or info.islnk():
        return f"is a link (to {info.linkname!r}); a bundle holds plain files only"
    if not (info.isfile() or info.isdir()):
        return "is not a plain file or directory (a device, FIFO...)"
    if info.size > MAX_MEMBER_BYTES:
        return f"is {info.size} bytes, more than a bundle member may be"
    return None


def read_bundle(path: Path) -> Bundle:
    """Read and verify every member of ``path`` against BUNDLE.json; raise naming the first
    member that is unsafe, missing, unlisted or whose sha256 differs."""
    members = _members(path)
    if INDEX_FILE not in members:
        raise BundleError(
            f"{path}: no {INDEX_FILE} index", hint="make it with `inferlab-bench bundle`"
        )
    index = _index(path, members.pop(INDEX_FILE))
    listed = {m["path"]: m for m in index["members"]}
    if missing := sorted(listed.keys() - members.keys()):
        raise BundleError(f"{path}: member {missing[0]} is listed in {INDEX_FILE} but missing")
    if unlisted := sorted(members.keys() - listed.keys()):
        raise BundleError(f"{path}: member {unlisted[0]} is not listed in {INDEX_FILE}")
    for name in sorted(listed):
        actual = hashlib.sha256(members[name]).hexdigest()
        if actual != listed[name]["sha256"]:
            raise BundleError(
                f"{path}: member {name} differs: sha256 {actual}, "
                f"{INDEX_FILE} says {listed[name]['sha256']}",
                hint="the bundle was altered or damaged after it was made",
            )
    bundle = Bundle(path, index, members)
    _check_population(bundle)
    return bundle


def unpack(bundle: Bundle, target: Path) -> Path:
    """Write every member of a verified bundle under ``target`` (each write atomic)."""
    root = target.resolve()
    for name, data in sorted(bundle.members.items()):
        destination = (root / name).resolve()
        if not destination.is_relative_to(root):  # a planted link in target itself
            raise BundleError(f"{bundle.path}: member {name} would be written outside {root}")
        write_bytes_atomic(destination, data)
    write_bytes_atomic(root / INDEX_FILE, orjson.dumps(bundle.index, option=orjson.OPT_INDENT_2))
    return root


def _members(path: Path) -> dict[str, bytes]:
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for info in tar:
                problem = member_problem(info)
                if problem is not None:
                    raise BundleError(f"{path}: member {info.name!r} {problem}; nothing unpacked")
                if info.isdir():
                    continue
                name = PurePosixPath(info.name).as_posix()
                if name in members:
                    raise BundleError(f"{path}: member {name} appears twice")
                handle = tar.extractfile(info)
                assert handle is not None  # a regular file always has content
                members[name] = handle.read()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BundleError(
            f"{path}: not a readable .tar.gz bundle ({exc})",
            hint="make it with `inferlab-bench bundle`; a truncated download reads like this",
        ) from exc
    return members


def _index(path: Path, blob: bytes) -> dict[str, Any]:
    try:
        index = orjson.loads(blob)
    except orjson.JSONDecodeError as exc:
        raise BundleError(f"{path}: {INDEX_FILE} is not JSON ({exc})") from exc
    if not isinstance(index, dict) or index.get("schema_name") != BUNDLE_SCHEMA:
        raise BundleError(f"{path}: {INDEX_FILE} is not an {BUNDLE_SCHEMA} index")
    members = index.get("members")
    if not isinstance(members, list) or not all(
        isinstance(m, dict) and isinstance(m.get("path"), str) and isinstance(m.get("sha256"), str)
        for m in members
    ):
        raise BundleError(f"{path}: {INDEX_FILE} members must list path and sha256")
    return index


def _check_population(bundle: Bundle) -> None:
    """The population's bytes hash to the digest the index, its .sha256 and every case name."""
    entry = bundle.index.get("population")
    if entry is None:
        return
    name = entry["path"]
    actual = hashlib.sha256(bundle.members[name]).hexdigest()
    claims = {f"{INDEX_FILE} population.sha256": entry["sha256"]}
    sha_file = name.rsplit("/", 1)[0] + "/population.sha256"
    if sha_file in bundle.members:
        claims[sha_file] = bundle.members[sha_file].decode(errors="replace").split()[0]
    for case in bundle.cases:
        for trial in case["trials"]:
            population = bundle.request(trial).population
            if population is not None:
                claims[f"{trial}/request.json population.sha256"] = population.sha256
    for where, claimed in claims.items():
        if claimed != actual:
            raise BundleError(
                f"{bundle.path}: population {name} has sha256 {actual}, {where} says {claimed}",
                hint="the bundle does not hold the population its cases ran with",
            )

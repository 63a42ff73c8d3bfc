"""Streaming a bundle's .tar.gz with caps: index first, then each member checked as it arrives.

Nothing is read whole before it is judged. The gzip stream is metered: the bytes it expands
to are capped in total (the index's declared sizes plus header room) and in ratio to the
compressed bytes consumed, so a gzip bomb is refused after a few MB rather than expanded.
Each member's header (name, type, size) is checked against BUNDLE.json before its first
byte is read, and its sha256 is computed in chunks while it is read. ``tarfile`` never
extracts anything itself.
"""

from __future__ import annotations

import gzip
import hashlib
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from inferlab_bench.errors import BundleError
from inferlab_bench.publish.contents import INDEX_FILE
from inferlab_bench.publish.trust import (
    MAX_INDEX_BYTES,
    MAX_MEMBER_BYTES,
    BundleIndex,
    MemberEntry,
    name_problem,
    parse_index,
)

MAX_RATIO = 100
"""Expanded / compressed bytes. Our bundles (JSON, Parquet, JSONL text) stay below 20; a
gzip bomb is near 1000. A chosen bound, not a measured one."""
RATIO_FLOOR_BYTES = 8 * 1024**2
"""The ratio is judged only past this many expanded bytes (tar padding compresses well)."""
HEADER_ROOM_BYTES = 8 * 1024
"""Per member, for its tar and PAX headers and padding."""
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Caps:
    """The bounds a bundle is read within (tests lower them)."""

    ratio: float = MAX_RATIO
    ratio_floor: int = RATIO_FLOOR_BYTES
    member: int = MAX_MEMBER_BYTES


DEFAULT_CAPS = Caps()


class _Meter:
    """A gzip reader that counts what it expands and refuses past the caps."""

    def __init__(self, path: Path, raw: IO[bytes], caps: Caps) -> None:
        self.path, self.raw, self.caps = path, raw, caps
        self.gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self.expanded = 0
        self.limit = MAX_INDEX_BYTES + 1024**2

    def read(self, size: int = -1) -> bytes:
        data = self.gz.read(CHUNK_BYTES if size < 0 else min(size, CHUNK_BYTES))
        self.expanded += len(data)
        if self.expanded > self.limit:
            raise BundleError(
                f"{self.path}: the archive expands past {self.limit} bytes, more than its "
                f"{INDEX_FILE} declares; nothing unpacked",
                hint="a gzip bomb or a damaged bundle; make bundles with `inferlab-bench bundle`",
            )
        consumed = max(self.raw.tell(), 1)
        if self.expanded > self.caps.ratio_floor and self.expanded > self.caps.ratio * consumed:
            raise BundleError(
                f"{self.path}: the archive expands {self.expanded / consumed:.0f}-fold "
                f"(at most {self.caps.ratio:g}); refused as a gzip bomb, nothing unpacked",
                hint="a bundle made by `inferlab-bench bundle` never compresses this well",
            )
        return data


def stream_members(path: Path, caps: Caps | None = None) -> tuple[BundleIndex, dict[str, bytes]]:
    """The typed index and every listed member's bytes, each checked as it streams by."""
    caps = caps or DEFAULT_CAPS
    try:
        with path.open("rb") as raw:
            meter = _Meter(path, raw, caps)
            with tarfile.open(fileobj=meter, mode="r|") as tar:  # type: ignore[call-overload]
                return _read(path, tar, meter, caps)
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as exc:
        raise BundleError(
            f"{path}: not a readable .tar.gz bundle ({exc})",
            hint="make it with `inferlab-bench bundle`; a truncated download reads like this",
        ) from exc


def _read(
    path: Path, tar: tarfile.TarFile, meter: _Meter, caps: Caps
) -> tuple[BundleIndex, dict[str, bytes]]:
    index: BundleIndex | None = None
    listed: dict[str, MemberEntry] = {}
    members: dict[str, bytes] = {}
    for info in tar:
        _check_header(path, info, caps)
        if info.isdir():
            continue
        name = info.name
        if index is None:
            if name != INDEX_FILE:
                raise BundleError(
                    f"{path}: the first member is {name!r}, not {INDEX_FILE}; nothing unpacked",
                    hint="`inferlab-bench bundle` writes its index first",
                )
            index = parse_index(path, _content(tar, info, MAX_INDEX_BYTES))
            listed = {m.path: m for m in index.members}
            meter.limit = info.size + sum(m.size for m in index.members)
            meter.limit += HEADER_ROOM_BYTES * (len(listed) + 4) + 1024**2
            continue
        entry = _listed(path, listed, members, info)
        data = _content(tar, info, entry.size)
        actual = hashlib.sha256(data).hexdigest()
        if actual != entry.sha256:
            raise BundleError(
                f"{path}: member {name} differs: sha256 {actual}, {INDEX_FILE} says {entry.sha256}",
                hint="the bundle was altered or damaged after it was made",
            )
        members[name] = data
    if index is None:
        raise BundleError(
            f"{path}: no {INDEX_FILE} index", hint="make it with `inferlab-bench bundle`"
        )
    if missing := sorted(listed.keys() - members.keys()):
        raise BundleError(f"{path}: member {missing[0]} is listed in {INDEX_FILE} but missing")
    return index, members


def _check_header(path: Path, info: tarfile.TarInfo, caps: Caps) -> None:
    problem = member_problem(info, caps)
    if problem is not None:
        raise BundleError(f"{path}: member {info.name!r} {problem}; nothing unpacked")


def member_problem(info: tarfile.TarInfo, caps: Caps | None = None) -> str | None:
    """Why a member may not be read (None when it is a safe file or directory)."""
    caps = caps or DEFAULT_CAPS
    problem = name_problem(info.name)
    if problem is not None:
        return problem
    if info.issym() or info.islnk():
        return f"is a link (to {info.linkname!r}); a bundle holds plain files only"
    if not (info.isfile() or info.isdir()):
        return "is not a plain file or directory (a device, FIFO...)"
    if info.size > caps.member:
        return f"is {info.size} bytes, more than a bundle member may be ({caps.member})"
    return None


def _listed(
    path: Path, listed: dict[str, MemberEntry], members: dict[str, bytes], info: tarfile.TarInfo
) -> MemberEntry:
    name = info.name
    if name in members or name == INDEX_FILE:
        raise BundleError(f"{path}: member {name} appears twice; nothing unpacked")
    entry = listed.get(name)
    if entry is None:
        raise BundleError(f"{path}: member {name} is not listed in {INDEX_FILE}")
    if info.size != entry.size:
        raise BundleError(
            f"{path}: member {name} differs: {info.size} bytes, {INDEX_FILE} says {entry.size}",
            hint="the bundle was altered or damaged after it was made",
        )
    return entry


def _content(tar: tarfile.TarFile, info: tarfile.TarInfo, limit: int) -> bytes:
    if info.size > limit:
        raise BundleError(f"member {info.name} is {info.size} bytes, at most {limit}")
    handle = tar.extractfile(info)
    if handle is None:  # a regular file always has content
        return b""
    chunks, total = [], 0
    while chunk := handle.read(CHUNK_BYTES):
        total += len(chunk)
        chunks.append(chunk)
    if total != info.size:
        raise EOFError(f"member {info.name} ends after {total} of {info.size} bytes")
    return b"".join(chunks)

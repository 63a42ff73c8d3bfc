"""Source-file stamps: a digest computed earlier is trusted while the file provably is the same.

Hashing the 642 MB ShareGPT file takes longer than a whole warm preparation. A stamp records,
next to the digest, what the kernel says about the file: device, inode, size, mtime_ns and
ctime_ns. Any write changes mtime and ctime; ``utime`` can put mtime back, but setting it
updates ctime, which no user call can set; replacing the file (rename over it) gives another
inode or device. So an equal stamp means the bytes hashed earlier are the bytes there now;
anything else means the file is hashed again (and a stamp taken around that hash is only
kept when the file did not change while it was read, nor in the ``SETTLED_NS`` before).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.prepare.cache import cache_home, file_sha256

STAMP_VERSION = 1
SETTLED_NS = 2_000_000_000
"""A stamp is only kept for a file last changed this long before it was hashed: on a file
system with coarse timestamps a write just after the hash could leave every field equal
(git calls such an entry racy). Such a file is simply hashed again next time."""


@dataclass(frozen=True)
class Stamp:
    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: Path) -> Stamp:
        st = os.stat(path)
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True)
class Digest:
    """A file's sha256, and whether it was hashed now or trusted from an equal stamp."""

    sha256: str
    source: str  # "recomputed" or "trusted-stamp"


def file_digest(path: Path) -> Digest:
    """The file's sha256: from its stamp when the stamp is equal, else hashed now."""
    before = Stamp.of(path)
    trusted = _stored(path)
    if trusted is not None and trusted[0] == before:
        return Digest(trusted[1], "trusted-stamp")
    started_ns = time.time_ns()
    sha256 = file_sha256(path)
    settled = before.ctime_ns < started_ns - SETTLED_NS
    if settled and Stamp.of(path) == before:  # the digest belongs to this stamp
        _store(path, before, sha256)
    return Digest(sha256, "recomputed")


def _stamp_path(path: Path) -> Path:
    name = hashlib.sha256(str(path.resolve()).encode()).hexdigest()
    return cache_home() / "stamps" / f"{name}.json"


def _stored(path: Path) -> tuple[Stamp, str] | None:
    try:
        facts = orjson.loads(_stamp_path(path).read_bytes())
        if facts.get("version") != STAMP_VERSION or facts.get("path") != str(path.resolve()):
            return None
        return Stamp(**facts["stamp"]), str(facts["sha256"])
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return None  # no stamp, or a damaged one: hash the file


def _store(path: Path, stamp: Stamp, sha256: str) -> None:
    facts = {
        "version": STAMP_VERSION,
        "path": str(path.resolve()),
        "stamp": asdict(stamp),
        "sha256": sha256,
    }
    with contextlib.suppress(OSError):  # a stamp not kept costs a re-hash next time
        write_bytes_atomic(_stamp_path(path), orjson.dumps(facts))

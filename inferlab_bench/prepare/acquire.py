"""Where the source bytes come from: the given path, the cache, or a verified download."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from inferlab_bench.errors import DigestMismatchError
from inferlab_bench.prepare.cache import cached_path
from inferlab_bench.prepare.catalog import CatalogEntry
from inferlab_bench.prepare.digest import verify
from inferlab_bench.prepare.stamp import file_digest
from inferlab_bench.progress import NULL_PROGRESS, ProgressSink

Origin = Literal["source_path", "cache", "download"]


@dataclass(frozen=True)
class Acquired:
    """A source file whose sha256 was verified: hashed now ("recomputed"), or hashed
    earlier and provably unchanged since ("trusted-stamp", see ``stamp``)."""

    path: Path
    sha256: str
    origin: Origin
    digest_source: str = "recomputed"


def acquire(
    entry: CatalogEntry, source_path: Path, progress: ProgressSink = NULL_PROGRESS
) -> Acquired:
    """``source_path`` if it hashes right, else the cache if it hashes right, else download.

    A ``source_path`` that exists with other bytes is refused with both digests: the caller
    named that file, and a download would hide that it is not the catalogued one.
    """
    for path, origin in ((source_path, "source_path"), (cached_path(entry.sha256), "cache")):
        if path.is_file():
            progress.begin(f"verifying {path.name}", None, unit="")
            digest = file_digest(path)
            progress.end()
            if digest.sha256 == entry.sha256:
                return Acquired(path, digest.sha256, origin, digest.source)  # type: ignore[arg-type]
            if origin == "source_path":
                raise DigestMismatchError(
                    f"source_path {path}",
                    entry.sha256,
                    digest.sha256,
                    hint="this file is not the catalogued dataset; fix or remove it, or give "
                    "a source_path that does not exist to download into the cache",
                )
            # A corrupt cache entry must not be used, and must not block a fresh download.
            path.unlink(missing_ok=True)
    # httpx (a tenth of a second to import) only when there is something to download.
    from inferlab_bench.prepare.download import download_verified

    downloaded = download_verified(entry.url, entry.sha256, cached_path(entry.sha256), progress)
    verify("downloaded file", entry.sha256, downloaded.sha256)
    return Acquired(downloaded.path, downloaded.sha256, "download")

"""The content-addressed cache: ``$XDG_CACHE_HOME/inferlab/datasets/sha256/<digest>``."""

from __future__ import annotations

from pathlib import Path

from inferlab_bench.layout import cache_root
from inferlab_bench.prepare.digest import StreamingHasher, check_sha256_format

_CHUNK = 4 << 20


def cache_home() -> Path:
    return cache_root()


def dataset_cache_dir() -> Path:
    return cache_home() / "datasets" / "sha256"


def cached_path(sha256: str) -> Path:
    """The cache entry of a digest; anything but 64 lower-case hex digits is refused, so a
    request's ``catalog.sha256`` can never name (and get deleted) a file elsewhere."""
    return dataset_cache_dir() / check_sha256_format(sha256, "catalog.sha256")


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in chunks (constant memory)."""
    hasher = StreamingHasher()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
    return hasher.hexdigest()

"""The only network I/O: stream a URL into the cache, hashing as it arrives, then rename."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx

from inferlab_bench.atomic import atomic_writer, remove_stale_parts
from inferlab_bench.errors import DownloadError
from inferlab_bench.prepare.digest import StreamingHasher, verify
from inferlab_bench.progress import NULL_PROGRESS, ProgressSink

_CHUNK = 1 << 20
TIMEOUT = httpx.Timeout(60.0, connect=15.0)


@dataclass(frozen=True)
class Downloaded:
    """A verified download now at ``path`` (its final, content-addressed name)."""

    path: Path
    sha256: str
    size_bytes: int
    url: str


def download_verified(
    url: str, expected_sha256: str, final_path: Path, progress: ProgressSink = NULL_PROGRESS
) -> Downloaded:
    """Download ``url`` to ``final_path`` only if its bytes hash to ``expected_sha256``.

    The bytes go to a temp file beside the final path, are fsynced, checked, and renamed;
    on any failure the temp file is removed and nothing appears at ``final_path``.
    """
    remove_stale_parts(final_path)
    with atomic_writer(final_path) as handle:
        hasher = _stream(url, handle, progress)
        verify(f"download of {url}", expected_sha256, hasher.hexdigest())
    return Downloaded(final_path, hasher.hexdigest(), hasher.size, url)


def _stream(url: str, handle: object, progress: ProgressSink) -> StreamingHasher:
    hasher = StreamingHasher()
    try:
        with httpx.stream("GET", url, timeout=TIMEOUT, follow_redirects=True) as response:
            if response.status_code != 200:
                raise DownloadError(
                    f"download of {url}: HTTP {response.status_code}",
                    hint="check the catalog URL and the network",
                )
            total = response.headers.get("content-length")
            progress.begin("downloading dataset", float(total) if total else None, unit="bytes")
            for chunk in response.iter_bytes(_CHUNK):
                handle.write(chunk)  # type: ignore[attr-defined]
                hasher.update(chunk)
                progress.advance(len(chunk))
            progress.end()
            _check_length(url, total, hasher.size)
    except httpx.HTTPError as exc:
        raise DownloadError(
            f"download of {url} failed after {hasher.size} bytes: {exc!r}",
            hint="the connection dropped or timed out; run again to retry",
        ) from exc
    except OSError as exc:
        raise DownloadError(
            f"download of {url}: cannot write to the cache ({exc.strerror or exc})",
            hint="free disk space or set XDG_CACHE_HOME elsewhere",
        ) from exc
    return hasher


def _check_length(url: str, declared: str | None, received: int) -> None:
    if declared is not None and declared.isdigit() and int(declared) != received:
        raise DownloadError(
            f"download of {url}: got {received} of {declared} bytes",
            hint="the connection dropped; run again to retry",
        )

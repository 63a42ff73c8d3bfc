"""Pure sha256 checks, apart from any I/O (the pattern of pip's hash checking)."""

from __future__ import annotations

import hashlib

from inferlab_bench.errors import DigestMismatchError, RequestError
from inferlab_bench.protocol import is_sha256_hex


def check_sha256_format(value: str, field: str) -> str:
    if not is_sha256_hex(value):
        raise RequestError(f"{field}: expected 64 lower-case hex digits, found {value!r}")
    return value


def verify(what: str, expected: str, actual: str) -> None:
    """Raise a mismatch error (both digests + a hint) unless the digests are equal."""
    if expected != actual:
        raise DigestMismatchError(what, expected, actual)


class StreamingHasher:
    """sha256 over chunks as they arrive; ``hexdigest`` once done."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.size = 0

    def update(self, chunk: bytes) -> None:
        self._hash.update(chunk)
        self.size += len(chunk)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()

"""Pure seeded selection: the required admitted entries with the smallest sha256 keys."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np


def selection_key(seed: int, source_id: str, index: int) -> int:
    """sha256 of ``"{seed}\\0{id}\\0{i}"`` read as a big-endian integer."""
    digest = hashlib.sha256(f"{seed}\0{source_id}\0{index}".encode()).digest()
    return int.from_bytes(digest, "big")


def select(seed: int, admitted: Iterable[tuple[int, str]], required: int) -> list[int]:
    """Indices of the ``required`` admitted (index, id) pairs with smallest (key, index),
    in ascending (key, index) order.

    Only pairs whose key's first 8 bytes are at most the ``required``-th smallest such
    prefix are compared in full: at least ``required`` keys have a prefix that small, and
    a larger prefix means a larger key, so no pair left out could be among the smallest.
    """
    pairs = list(admitted)
    if required <= 0 or not pairs:
        return []
    sha256 = hashlib.sha256
    digests = [sha256(f"{seed}\0{sid}\0{index}".encode()).digest() for index, sid in pairs]
    candidates: Iterable[int] = range(len(pairs))
    if len(pairs) > required:
        prefixes = np.frombuffer(b"".join([d[:8] for d in digests]), dtype=">u8")
        kth = np.partition(prefixes, required - 1)[required - 1]
        candidates = np.flatnonzero(prefixes <= kth).tolist()
    keyed = sorted((int.from_bytes(digests[c], "big"), pairs[c][0]) for c in candidates)
    return [index for _, index in keyed[:required]]

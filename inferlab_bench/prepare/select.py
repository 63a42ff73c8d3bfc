"""Pure seeded selection: the required admitted entries with the smallest sha256 keys."""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable


def selection_key(seed: int, source_id: str, index: int) -> int:
    """sha256 of ``"{seed}\\0{id}\\0{i}"`` read as a big-endian integer."""
    digest = hashlib.sha256(f"{seed}\0{source_id}\0{index}".encode()).digest()
    return int.from_bytes(digest, "big")


def select(seed: int, admitted: Iterable[tuple[int, str]], required: int) -> list[int]:
    """Indices of the ``required`` admitted (index, id) pairs with smallest (key, index),
    in ascending (key, index) order.

    Digests of one length compare as bytes exactly as their big-endian integers do, so
    the ``required``-th smallest digest is found without making integers; only the pairs
    whose digest is at most that one are sorted by (key, index).
    """
    pairs = list(admitted)
    if required <= 0 or not pairs:
        return []
    sha256 = hashlib.sha256
    digests = [sha256(f"{seed}\0{sid}\0{index}".encode()).digest() for index, sid in pairs]
    candidates: Iterable[int] = range(len(pairs))
    if len(pairs) > required:
        kth = heapq.nsmallest(required, digests)[-1]
        candidates = [c for c, digest in enumerate(digests) if digest <= kth]
    keyed = sorted((int.from_bytes(digests[c], "big"), pairs[c][0]) for c in candidates)
    return [index for _, index in keyed[:required]]

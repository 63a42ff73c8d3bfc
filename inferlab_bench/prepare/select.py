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
    in ascending (key, index) order."""
    keyed = ((selection_key(seed, sid, index), index) for index, sid in admitted)
    return [index for _, index in heapq.nsmallest(required, keyed)]

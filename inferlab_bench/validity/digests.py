"""Digests that let another run or tool prove it sent the same work.

``population_sha256`` hashes the population file's bytes. ``sequence_sha256`` hashes the
session ids in send order, each followed by a newline, UTF-8 encoded; ``set_sha256``
hashes the same ids sorted, which is independent of the interleaving that concurrent
workers may cause.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from inferlab_bench.validity.inputs import PhaseRecords
from inferlab_bench.validity.verdict import Figures


class SequenceDigest(Figures):
    """What one phase sent: how many requests, in which order, and which ones."""

    phase: str
    requests: int
    sequence_sha256: str
    set_sha256: str
    first_session_id: str | None
    last_session_id: str | None


def population_sha256(population: bytes) -> str:
    """sha256 hex digest of the population file's bytes."""
    return hashlib.sha256(population).hexdigest()


def ids_sha256(session_ids: Iterable[str]) -> str:
    """sha256 of ``id + "\\n"`` for each id, in the given order."""
    digest = hashlib.sha256()
    for session_id in session_ids:
        digest.update(session_id.encode("utf-8") + b"\n")
    return digest.hexdigest()


def sequence_digest(phase: str, records: PhaseRecords) -> SequenceDigest:
    """Digest of the ids in send order and of the sorted ids."""
    ordered = [records.session_ids[i] for i in records.send_order()]
    return SequenceDigest(
        phase=phase,
        requests=len(ordered),
        sequence_sha256=ids_sha256(ordered),
        set_sha256=ids_sha256(sorted(ordered)),
        first_session_id=ordered[0] if ordered else None,
        last_session_id=ordered[-1] if ordered else None,
    )

"""Population and send-order digests."""

from __future__ import annotations

import hashlib

import numpy as np

from inferlab_bench.validity import population_sha256, sequence_digest
from tests.validity.builders import T0, records


def test_population_digest_is_the_sha256_of_the_bytes() -> None:
    assert population_sha256(b"abc\n") == hashlib.sha256(b"abc\n").hexdigest()


def test_sequence_digest_follows_send_order_and_the_set_digest_ignores_it() -> None:
    starts = T0 + np.array([30, 10, 20], dtype=np.int64)
    ids = ("c", "a", "b")
    digest = sequence_digest("profiling", records(starts, session_ids=ids))
    assert digest.sequence_sha256 == hashlib.sha256(b"a\nb\nc\n").hexdigest()
    assert (digest.first_session_id, digest.last_session_id, digest.requests) == ("a", "c", 3)
    swapped = records(starts, issued_ns=T0 + np.array([1, 3, 2], dtype=np.int64), session_ids=ids)
    other = sequence_digest("profiling", swapped)
    assert other.sequence_sha256 == hashlib.sha256(b"c\nb\na\n").hexdigest()
    assert other.set_sha256 == digest.set_sha256


def test_ties_in_time_are_broken_by_session_id() -> None:
    starts = np.full(3, T0, dtype=np.int64)
    digest = sequence_digest("warmup", records(starts, session_ids=("z", "x", "y")))
    assert digest.sequence_sha256 == hashlib.sha256(b"x\ny\nz\n").hexdigest()

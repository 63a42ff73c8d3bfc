"""Selection (digests compared as bytes to find the cut) chooses what full keys choose."""

from __future__ import annotations

import heapq
import random

from inferlab_bench.prepare.select import select, selection_key


def _reference(seed: int, admitted: list[tuple[int, str]], required: int) -> list[int]:
    keyed = ((selection_key(seed, sid, index), index) for index, sid in admitted)
    return [index for _, index in heapq.nsmallest(required, keyed)]


def test_select_equals_the_smallest_full_keys() -> None:
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(0, 200)
        admitted = [
            (i, rng.choice(["a", "b", f"row-{i}", "x" * rng.randint(0, 9)])) for i in range(n)
        ]
        admitted = rng.sample(admitted, k=rng.randint(0, n))
        required = rng.randint(0, 220)
        seed = rng.randint(0, 3)
        assert select(seed, admitted, required) == _reference(seed, admitted, required)

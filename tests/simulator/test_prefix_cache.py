"""The pure prefix cache: chained block hashes, LRU capacity, clearing."""

from __future__ import annotations

from inferlab_bench.simulator.prefix_cache import PrefixCache, block_hashes


def test_hashes_are_chained_and_skip_the_partial_block() -> None:
    a = block_hashes(list(range(40)), 16)
    assert len(a) == 2
    b = block_hashes([99] * 16 + list(range(16, 32)), 16)
    assert a[1] != b[1]  # same second block, different parent


def test_repeat_is_cached_up_to_the_last_token() -> None:
    cache = PrefixCache(16, 100)
    ids = list(range(40))
    assert cache.lookup(ids) == 0
    cache.insert(ids)
    assert cache.lookup(ids) == 32
    exact = list(range(32))
    cache.insert(exact)
    assert cache.lookup(exact) == 16  # the last token is always computed


def test_shared_prefix_and_divergence() -> None:
    cache = PrefixCache(4, 100)
    cache.insert([1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert cache.lookup([1, 2, 3, 4, 0, 6, 7, 8, 9]) == 4


def test_lru_eviction_and_clear() -> None:
    cache = PrefixCache(2, 3)
    cache.insert([1, 1, 2, 2, 3, 3])
    cache.insert([9, 9, 8, 8])  # evicts the two oldest blocks of the first prompt
    assert len(cache) == 3
    assert cache.lookup([1, 1, 2, 2, 3, 3, 0]) == 0
    assert cache.clear() == 3 and len(cache) == 0


def test_zero_capacity_disables() -> None:
    cache = PrefixCache(2, 0)
    cache.insert([1, 2, 3, 4])
    assert cache.lookup([1, 2, 3, 4, 5]) == 0

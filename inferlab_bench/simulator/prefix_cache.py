"""A simulated prefix cache: chained block hashes of prompt token ids in an LRU (pure)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


def block_hashes(token_ids: Sequence[int], block_size: int) -> list[int]:
    """Chained hashes of the full blocks: each covers its block and every block before it.

    Like vLLM, a block's hash includes its parent's, so equal blocks at different
    positions or after different prefixes never collide; a trailing partial block has none.
    """
    hashes: list[int] = []
    parent = 0
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        # Tuples of ints hash deterministically (no PYTHONHASHSEED salt); 64 bits suffice.
        parent = hash((parent, tuple(token_ids[start : start + block_size])))
        hashes.append(parent)
    return hashes


class PrefixCache:
    """LRU of block hashes with a capacity in blocks; ``capacity_blocks`` 0 disables it."""

    def __init__(self, block_size: int, capacity_blocks: int) -> None:
        self.block_size = block_size
        self.capacity_blocks = capacity_blocks
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup(self, token_ids: Sequence[int]) -> int:
        """Cached prompt tokens: the leading run of cached blocks, in tokens.

        As in vLLM, the last prompt token is always computed, so a fully cached prompt
        reports at most the blocks within its first ``len - 1`` tokens.
        """
        hits = 0
        for digest in block_hashes(token_ids[: max(0, len(token_ids) - 1)], self.block_size):
            if digest not in self._blocks:
                break
            self._blocks.move_to_end(digest)
            hits += 1
        return hits * self.block_size

    def insert(self, token_ids: Sequence[int]) -> None:
        """Store every full block of the prompt, evicting least recently used blocks."""
        if self.capacity_blocks == 0:
            return
        for digest in block_hashes(token_ids, self.block_size):
            self._blocks[digest] = None
            self._blocks.move_to_end(digest)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)

    def clear(self) -> int:
        """Empty the cache; return how many blocks were dropped."""
        dropped = len(self._blocks)
        self._blocks.clear()
        return dropped

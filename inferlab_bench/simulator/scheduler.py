"""The asyncio side of the engine: waiting for a slot and sleeping to a monotonic schedule."""

from __future__ import annotations

import asyncio
import time

from inferlab_bench.simulator.latency import Engine


async def sleep_until(target: float) -> None:
    """Sleep until ``time.monotonic()`` reaches ``target``; return at once if it has."""
    delay = target - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


class Scheduler:
    """Admits sequences through the pure ``Engine``; a queued sequence awaits its slot."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._waiters: dict[int, asyncio.Future[None]] = {}

    async def acquire(self, seq: int) -> None:
        """Return once ``seq`` holds a slot (at once when one is free)."""
        if self.engine.arrive(seq):
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters[seq] = waiter
        await waiter

    def release(self, seq: int) -> None:
        """Free the slot of ``seq`` (or its place in the queue) and wake who gets a slot."""
        self._waiters.pop(seq, None)
        for admitted in self.engine.finish(seq):
            waiter = self._waiters.pop(admitted, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)


class SequenceClock:
    """When each token of one admitted sequence is due, on a drift-free schedule.

    Targets advance by the model's durations, not by the time actually slept, so timer
    lateness is paid back on the next token; a wake later than a whole gap rebases the
    schedule to now instead of bursting tokens out to catch up.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.due = time.monotonic()

    async def prefill(self, uncached_tokens: int) -> None:
        """Sleep through the prefill of a just-admitted sequence."""
        self.due = time.monotonic() + self.engine.prefill_seconds(uncached_tokens)
        await sleep_until(self.due)

    async def next_token(self) -> None:
        """Sleep one inter-token gap past the previous due time."""
        self.due = max(self.due + self.engine.inter_token_seconds(), time.monotonic())
        await sleep_until(self.due)

"""The asyncio side of the engine: waiting for a slot and sleeping to a monotonic schedule."""

from __future__ import annotations

import asyncio
import time

from inferlab_bench.simulator.latency import Engine

# Tokens written back to back before the loop is given a turn.
BURST_TOKENS = 64


class Sleeper:
    """Sleeps to absolute ``time.monotonic()`` targets, learning the loop's timer overshoot.

    Event-loop timers run on a 1 ms grid (libuv under uvicorn's uvloop, epoll otherwise),
    so a plain sleep ends a few tenths of a millisecond late on average. Each wake-up
    feeds its error back into ``lead`` (how early to wake), which settles where the
    mean error is zero. Targets are absolute, so errors never accumulate into drift.
    """

    def __init__(self, lead: float = 0.0002, gain: float = 0.05, max_lead: float = 0.001) -> None:
        self.lead = lead
        self.gain = gain
        self.max_lead = max_lead

    async def until(self, target: float) -> bool:
        """Return at ``target`` (or at once if it has passed); True if it slept."""
        delay = target - time.monotonic() - self.lead
        if delay <= 0:
            return False
        await asyncio.sleep(delay)
        error = time.monotonic() - target
        self.lead = min(max(self.lead + self.gain * error, 0.0), self.max_lead)
        return True


class Scheduler:
    """Admits sequences through the pure ``Engine``; a queued sequence awaits its slot."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # Prefill and decode waits are armed at different points of a loop iteration and
        # overshoot differently, so each learns its own lead.
        self.prefill_sleeper = Sleeper()
        self.decode_sleeper = Sleeper()
        self._waiters: dict[int, asyncio.Future[None]] = {}

    async def acquire(self, seq: int) -> bool:
        """Return once ``seq`` holds a slot; True if one was free at once (no queueing)."""
        if self.engine.arrive(seq):
            return True
        waiter = asyncio.get_running_loop().create_future()
        self._waiters[seq] = waiter
        await waiter
        return False

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
    lateness is paid back on the next token; when the schedule has fallen behind by a
    whole gap (a blocked loop, an overloaded machine) it restarts from now instead of
    bursting tokens out to catch up.
    """

    def __init__(self, scheduler: Scheduler, start: float) -> None:
        self.engine = scheduler.engine
        self._prefill = scheduler.prefill_sleeper
        self._decode = scheduler.decode_sleeper
        self.due = start
        self._unslept = 0  # tokens in a row that were due at once

    async def prefill(self, uncached_tokens: int) -> None:
        """Sleep through the prefill, counted from ``start`` (arrival, or admission if queued).

        Counting from arrival keeps the server's own parsing and tokenizing inside the
        modeled TTFT instead of adding to it.
        """
        self.due += self.engine.prefill_seconds(uncached_tokens)
        # Yield once first: a timer armed late in a busy loop iteration (after parsing and
        # tokenizing) is measured from a stale loop clock and fires ~0.5 ms late.
        await asyncio.sleep(0)
        await self._prefill.until(self.due)

    async def next_token(self) -> None:
        """Sleep one inter-token gap past the previous due time."""
        gap = self.engine.inter_token_seconds()
        now = time.monotonic()
        self.due = self.due + gap if self.due + gap >= now else now + gap
        if await self._decode.until(self.due):
            self._unslept = 0
            return
        self._unslept += 1
        if self._unslept >= BURST_TOKENS:
            # Tokens due at once (no modeled latency, a late schedule) never wait, and
            # writing them does not either: yield now and then so that one long answer
            # does not hold the event loop, and every other client, until it ends.
            self._unslept = 0
            await asyncio.sleep(0)

"""The latency model: a pure, seeded engine state with vLLM-like slots and timing formulas.

The simulated engine runs at most ``max_num_seqs`` sequences at once; a request that
arrives while all slots are taken waits in a FIFO queue until one frees. Once admitted:

    TTFT = queue wait + prefill_base_ms + prefill_ms_per_token * uncached_prompt_tokens
    ITL  = decode_base_ms + decode_ms_per_seq * running_sequences

``running_sequences`` is the number of admitted sequences (this one included) at the
moment the previous token was sent, so inter-token latency grows with concurrency.
With ``jitter`` = j every duration is multiplied by a factor drawn uniformly from
[1 - j, 1 + j] by the engine's seeded RNG (the median stays on the formula).
Nothing here reads a clock: callers sleep for the durations returned.
"""

from __future__ import annotations

import random
from collections import deque

from inferlab_bench.simulator.config import LatencyConfig


def prefill_seconds(latency: LatencyConfig, uncached_tokens: int) -> float:
    """Time from admission to the first token, without jitter."""
    return (latency.prefill_base_ms + latency.prefill_ms_per_token * uncached_tokens) / 1000.0


def inter_token_seconds(latency: LatencyConfig, running: int) -> float:
    """Time between two tokens of one sequence while ``running`` sequences run, no jitter."""
    return (latency.decode_base_ms + latency.decode_ms_per_seq * running) / 1000.0


class Engine:
    """Slots, the FIFO wait queue and the jittered durations of the simulated engine."""

    def __init__(self, latency: LatencyConfig, seed: int = 0) -> None:
        self.latency = latency
        self._rng = random.Random(f"latency:{seed}")
        self._running: set[int] = set()
        self._waiting: deque[int] = deque()

    @property
    def running(self) -> int:
        """Number of admitted sequences."""
        return len(self._running)

    @property
    def waiting(self) -> int:
        """Number of sequences queued for a slot."""
        return len(self._waiting)

    def arrive(self, seq: int) -> bool:
        """Register a new sequence; True if it was admitted at once, False if it queues."""
        if len(self._running) < self.latency.max_num_seqs and not self._waiting:
            self._running.add(seq)
            return True
        self._waiting.append(seq)
        return False

    def finish(self, seq: int) -> list[int]:
        """Release ``seq`` (running or still waiting); return the sequences admitted now."""
        if seq in self._running:
            self._running.discard(seq)
        elif seq in self._waiting:
            self._waiting.remove(seq)
        admitted = []
        while self._waiting and len(self._running) < self.latency.max_num_seqs:
            nxt = self._waiting.popleft()
            self._running.add(nxt)
            admitted.append(nxt)
        return admitted

    def prefill_seconds(self, uncached_tokens: int) -> float:
        """Jittered prefill duration for a just-admitted sequence."""
        return self._jitter(prefill_seconds(self.latency, uncached_tokens))

    def inter_token_seconds(self) -> float:
        """Jittered gap before the next token of a running sequence."""
        return self._jitter(inter_token_seconds(self.latency, max(1, len(self._running))))

    def _jitter(self, seconds: float) -> float:
        j = self.latency.jitter
        if j == 0 or seconds == 0:
            return seconds
        return seconds * (1.0 + self._rng.uniform(-j, j))

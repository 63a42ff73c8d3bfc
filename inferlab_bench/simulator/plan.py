"""What one request will get: output length, finish reason and faults, decided up front (pure).

Every decision comes from the request's own RNG, seeded by (server seed, arrival index),
so a run with the same seed and arrival order is reproduced exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from inferlab_bench.simulator.config import FaultConfig

# Space-prefixed common words: each is one token in byte-level BPE vocabularies (GPT-2,
# Qwen2, Llama 3), and they stay one token each when concatenated, so a client that
# re-tokenizes the streamed text counts the same number as the server reports.
WORDS: tuple[str, ...] = (
    " the",
    " of",
    " and",
    " to",
    " in",
    " is",
    " that",
    " for",
    " it",
    " on",
    " with",
    " as",
    " was",
    " at",
    " by",
    " be",
)


@dataclass(frozen=True)
class Sampling:
    """The output-length fields of a request body."""

    max_tokens: int | None
    min_tokens: int | None
    ignore_eos: bool


@dataclass(frozen=True)
class RequestPlan:
    """The decided fate of one request."""

    output_tokens: int
    finish_reason: str
    error_status: int | None = None
    stall_seconds: float = 0.0
    drop_after: int | None = None
    malformed_after: int | None = None
    prompt_tokens_offset: int = 0
    faults: tuple[str, ...] = ()
    # Per choice (n > 1, or a batch of prompts): lengths and finish reasons; the first
    # is output_tokens / finish_reason. Empty means the one choice above.
    lengths: tuple[int, ...] = ()
    finish_reasons: tuple[str, ...] = ()

    @property
    def choice_lengths(self) -> tuple[int, ...]:
        """Tokens of every choice."""
        return self.lengths or (self.output_tokens,)

    @property
    def choice_finish_reasons(self) -> tuple[str, ...]:
        """Finish reason of every choice."""
        return self.finish_reasons or (self.finish_reason,)

    @property
    def ticks(self) -> int:
        """Token steps the request takes: its longest choice (choices decode in lockstep)."""
        return max(self.choice_lengths)

    @property
    def fault(self) -> str | None:
        """The injected faults joined by '+', or None."""
        return "+".join(self.faults) or None


def request_rng(seed: int, index: int) -> random.Random:
    """The RNG of the ``index``-th request (0-based arrival order)."""
    return random.Random(f"request:{seed}:{index}")


def output_length(sampling: Sampling, limit: int, rng: random.Random) -> int:
    """Exactly max_tokens with ignore_eos; else seeded between min_tokens and max_tokens."""
    top = sampling.max_tokens if sampling.max_tokens is not None else limit
    if sampling.ignore_eos:
        return top
    low = min(max(sampling.min_tokens or 1, 1), top)
    return rng.randint(low, top) if top > 0 else 0


def make_plan(
    sampling: Sampling, limit: int, faults: FaultConfig, rng: random.Random, choices: int = 1
) -> RequestPlan:
    """Decide length and faults; faults are drawn in a fixed order so seeds reproduce.

    The lengths of further choices are drawn after everything else, so a one-choice
    request is planned exactly as before they existed.
    """
    n = output_length(sampling, limit, rng)
    top = sampling.max_tokens if sampling.max_tokens is not None else limit
    hit = [_draw(rng, rate) for rate in _rates(faults)]
    names: list[str] = []
    if hit[0]:
        names.append(f"error_{faults.error_status}")
    if hit[1]:
        names.append("stall")
    if hit[2]:
        names.append("drop")
    if hit[3]:
        names.append("malformed")
    if faults.prompt_tokens_offset:
        names.append("prompt_tokens_offset")
    lengths = [n] + [output_length(sampling, limit, rng) for _ in range(choices - 1)]
    if faults.ignore_min_tokens and max(lengths) > 1:
        lengths = [k // 2 if k > 1 else k for k in lengths]
        names.append("ignore_min_tokens")
    reasons = ["length" if k >= top else "stop" for k in lengths]
    n = lengths[0]
    return RequestPlan(
        output_tokens=n,
        finish_reason=reasons[0],
        lengths=tuple(lengths) if choices > 1 else (),
        finish_reasons=tuple(reasons) if choices > 1 else (),
        error_status=faults.error_status if hit[0] else None,
        stall_seconds=faults.stall_seconds if hit[1] else 0.0,
        drop_after=faults.drop_after_tokens if hit[2] else None,
        malformed_after=faults.malformed_after_tokens if hit[3] else None,
        prompt_tokens_offset=faults.prompt_tokens_offset,
        faults=tuple(names),
    )


def token_text(index: int, position: int) -> str:
    """The ``position``-th output token of request ``index``."""
    return WORDS[token_id(index, position)]


def token_id(index: int, position: int) -> int:
    """The id reported for that token: its index in ``WORDS`` (not a vocabulary id)."""
    return (index + position) % len(WORDS)


def _rates(faults: FaultConfig) -> tuple[float, float, float, float]:
    return (faults.error_rate, faults.stall_rate, faults.drop_rate, faults.malformed_rate)


def _draw(rng: random.Random, rate: float) -> bool:
    # Always consume one draw so a rate change does not shift the other decisions.
    return rng.random() < rate

"""Prefix reuse reconciled: the cached prompt tokens a server reported per turn against the
history each turn shares with the turn before it, which the population says exactly.

A session's later turn sends the whole history again: everything up to the previous turn's
prompt is in the server's prefix cache if it kept it, so the server should report as cached
at least the tokens the turn shares with the previous prompt (the evidence's
``reusable_prefix_tokens``, never more than the previous turn's input), in whole cache
blocks, and never the prompt's last token (it is always computed). A later turn that read
less was served without its history: when no later turn read anything the server has no
prefix caching on; when some did, the cache dropped the others' history (evicted, or too
small). A first turn after a reset may read only what it shares with prompts sent before
it (a chat template's preamble); more came from before the reset. Pure: values in, figures
out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from inferlab_bench.validity.verdict import (
    Check,
    Figures,
    Verdict,
    combine_checks,
    not_applicable,
    unknown,
)

NAMED = 3
"""At most this many turns are named in a sentence."""


@dataclass(frozen=True)
class TurnObservation:
    """One measured turn: what the server reported and what the population says."""

    session_id: str
    turn: int
    succeeded: bool
    prompt_tokens: float
    """The server's prompt tokens (NaN when not reported)."""
    cached_tokens: float
    """The server's cached prompt tokens (NaN when not reported)."""
    reusable_prefix_tokens: int
    """Tokens shared with the previous turn's full context (0 for a first turn)."""
    previous_input_tokens: int
    """The previous turn's input tokens (0 for a first turn)."""
    shared_with_earlier: int | None = None
    """First turns: the most tokens the prompt shares with any prompt sent before it in
    the measured phase (None: unknown)."""


class TurnReuse(Figures):
    """A turn named in the verdict, with its figures."""

    session_id: str
    turn: int
    cached_tokens: int
    expected_tokens: int
    """Later turns: the least they should read; first turns: the most they may read."""


class PrefixReuse(Figures):
    """The verdict ``prefix_reuse_reconciled`` and its figures."""

    prefix_reuse_reconciled: Verdict
    block_tokens: int
    cold_start_expected: bool
    first_turns: int
    later_turns: int
    later_turns_expected_to_hit: int
    later_turns_hit: int
    expected_cached_tokens: int
    """Sum over later turns of what each should have read."""
    cached_tokens_later: int
    cached_tokens_first: int
    cause: str | None
    """``no_prefix_caching``, ``evicted``, ``warm_first_turn`` or None."""
    reason: str
    short_turns: tuple[TurnReuse, ...]
    warm_first_turns: tuple[TurnReuse, ...]
    checks: tuple[Check, ...]


def expected_cached(observation: TurnObservation, block_tokens: int) -> int:
    """What a later turn should read from cache: its reusable prefix, bounded by the previous
    prompt and by the prompt less its last token, in whole blocks."""
    prompt = observation.prompt_tokens
    limit = int(prompt) - 1 if math.isfinite(prompt) else observation.reusable_prefix_tokens
    reusable = min(observation.reusable_prefix_tokens, observation.previous_input_tokens, limit)
    return max(0, reusable) // block_tokens * block_tokens


def reconcile_prefix_reuse(
    observations: Sequence[TurnObservation], block_tokens: int, cold_start_expected: bool
) -> PrefixReuse:
    """Judge every succeeded turn's cached tokens; ``cold_start_expected``: the cache was
    reset right before the measured phase."""
    done = [o for o in observations if o.succeeded]
    first = [o for o in done if o.turn == 0]
    later = [o for o in done if o.turn > 0]
    reported = [o for o in done if math.isfinite(o.cached_tokens)]
    expected = {id(o): expected_cached(o, block_tokens) for o in later}
    should_hit = [o for o in later if expected[id(o)] > 0]
    short = [_named(o, expected[id(o)]) for o in should_hit if _cached(o) < expected[id(o)]]
    warm = [
        _named(o, o.shared_with_earlier or 0)
        for o in first
        if o.shared_with_earlier is not None and _cached(o) > o.shared_with_earlier
    ]
    later_check, cause, reason = _later_check(reported, should_hit, short, expected)
    first_check = _first_check(first, warm, cold_start_expected, bool(reported))
    if cause is None and first_check.verdict is Verdict.FAIL:
        cause, reason = "warm_first_turn", first_check.detail
    checks = (later_check, first_check)
    return PrefixReuse(
        prefix_reuse_reconciled=combine_checks(checks),
        block_tokens=block_tokens,
        cold_start_expected=cold_start_expected,
        first_turns=len(first),
        later_turns=len(later),
        later_turns_expected_to_hit=len(should_hit),
        later_turns_hit=len(should_hit) - len(short),
        expected_cached_tokens=sum(expected.values()),
        cached_tokens_later=sum(_cached(o) for o in later),
        cached_tokens_first=sum(_cached(o) for o in first),
        cause=cause,
        reason=reason,
        short_turns=tuple(short[:NAMED]),
        warm_first_turns=tuple(warm[:NAMED]),
        checks=checks,
    )


def _cached(observation: TurnObservation) -> int:
    value = observation.cached_tokens
    return int(value) if math.isfinite(value) else 0


def _named(observation: TurnObservation, expected: int) -> TurnReuse:
    return TurnReuse(
        session_id=observation.session_id,
        turn=observation.turn,
        cached_tokens=_cached(observation),
        expected_tokens=expected,
    )


def _later_check(
    reported: list[TurnObservation],
    should_hit: list[TurnObservation],
    short: list[TurnReuse],
    expected: dict[int, int],
) -> tuple[Check, str | None, str]:
    name = "later_turns_reused_history"
    if not reported:
        text = "the server reports no cached prompt tokens: prefix reuse cannot be reconciled"
        return unknown(name, text), None, text
    if not should_hit:
        text = "no measured later turn shares a whole cache block with its previous prompt"
        return not_applicable(name, text), None, text
    total = sum(expected[id(o)] for o in should_hit)
    if not short:
        text = (
            f"all {len(should_hit)} later turns read at least their reusable prefix from cache "
            f"({total} tokens expected in all)"
        )
        return Check(name=name, verdict=Verdict.PASS, observed=0, bound=0, detail=text), None, text
    missing = sum(turn.expected_tokens - turn.cached_tokens for turn in short)
    first = short[0]
    example = (
        f"first: {first.session_id} turn {first.turn} read {first.cached_tokens} of "
        f"{first.expected_tokens}"
    )
    if all(turn.cached_tokens == 0 for turn in short) and len(short) == len(should_hit):
        cause = "no_prefix_caching"
        text = (
            f"no prefix caching: none of the {len(should_hit)} later turns read a cached token "
            f"though they share {total} tokens with their previous prompts ({example})"
        )
    else:
        cause = "evicted"
        text = (
            f"evicted: {len(short)} of {len(should_hit)} later turns read fewer cached tokens "
            f"than their reusable prefix, {missing} of {total} tokens short; the cache dropped "
            f"their history (too small for the sessions in flight?) ({example})"
        )
    check = Check(name=name, verdict=Verdict.FAIL, observed=len(short), bound=0, detail=text)
    return check, cause, text


def _first_check(
    first: list[TurnObservation], warm: list[TurnReuse], cold: bool, reported: bool
) -> Check:
    name = "first_turns_cold"
    if not cold:
        return not_applicable(name, "no prefix-cache reset was asked")
    if not reported:
        return unknown(name, "the server reports no cached prompt tokens")
    judged = [o for o in first if o.shared_with_earlier is not None]
    if not judged:
        return unknown(name, "the first turns' prompts are unknown")
    if not warm:
        return Check(
            name=name,
            verdict=Verdict.PASS,
            observed=0,
            bound=0,
            detail=f"no first turn of {len(judged)} read more than it shares with earlier prompts",
        )
    turn = warm[0]
    detail = (
        f"warm first turn: {len(warm)} of {len(judged)} first turns read cached tokens the "
        f"reset should have dropped (first: {turn.session_id} read {turn.cached_tokens}, "
        f"at most {turn.expected_tokens} shared with earlier prompts)"
    )
    return Check(name=name, verdict=Verdict.FAIL, observed=len(warm), bound=0, detail=detail)

"""prefix_reuse_reconciled: each outcome, the block rounding, and the sentence's figures."""

from __future__ import annotations

import math

from inferlab_bench.validity.prefix_reuse import (
    TurnObservation,
    expected_cached,
    reconcile_prefix_reuse,
)
from inferlab_bench.validity.verdict import Verdict


def turn(
    session: str,
    index: int,
    cached: float,
    *,
    prompt: float = 400,
    reusable: int = 0,
    previous: int = 0,
    shared: int | None = None,
) -> TurnObservation:
    return TurnObservation(
        session_id=session,
        turn=index,
        succeeded=True,
        prompt_tokens=prompt,
        cached_tokens=cached,
        reusable_prefix_tokens=reusable,
        previous_input_tokens=previous,
        shared_with_earlier=shared,
    )


def sessions(second_turn_cached: list[float], first_cached: float = 0) -> list[TurnObservation]:
    out = []
    for number, cached in enumerate(second_turn_cached):
        out.append(turn(f"s{number}", 0, first_cached, prompt=200, shared=5))
        out.append(turn(f"s{number}", 1, cached, reusable=230, previous=200))
    return out


def test_expected_is_the_shared_prefix_within_the_previous_prompt_in_whole_blocks() -> None:
    # 230 shared with the previous full context, of which the previous prompt holds 200.
    assert expected_cached(turn("s", 1, 0, reusable=230, previous=200), 16) == 192
    assert expected_cached(turn("s", 1, 0, reusable=100, previous=200), 16) == 96
    assert expected_cached(turn("s", 1, 0, reusable=100, previous=200), 1) == 100
    # The prompt's last token is always computed.
    assert expected_cached(turn("s", 1, 0, prompt=101, reusable=200, previous=200), 1) == 100
    assert expected_cached(turn("s", 1, 0, prompt=math.nan, reusable=50, previous=200), 1) == 50


def test_passes_when_every_later_turn_read_its_prefix() -> None:
    found = reconcile_prefix_reuse(sessions([192, 208]), 16, cold_start_expected=True)
    assert found.prefix_reuse_reconciled is Verdict.PASS
    assert (found.later_turns_hit, found.expected_cached_tokens) == (2, 384)
    assert found.cause is None


def test_no_later_turn_hit_names_no_prefix_caching() -> None:
    found = reconcile_prefix_reuse(sessions([0, 0, 0]), 16, cold_start_expected=True)
    assert found.prefix_reuse_reconciled is Verdict.FAIL
    assert found.cause == "no_prefix_caching"
    assert found.reason == (
        "no prefix caching: none of the 3 later turns read a cached token though they share "
        "576 tokens with their previous prompts (first: s0 turn 1 read 0 of 192)"
    )


def test_some_later_turns_short_names_eviction_with_figures() -> None:
    found = reconcile_prefix_reuse(sessions([192, 0, 64]), 16, cold_start_expected=False)
    assert found.prefix_reuse_reconciled is Verdict.FAIL
    assert found.cause == "evicted"
    assert found.reason.startswith(
        "evicted: 2 of 3 later turns read fewer cached tokens than their reusable prefix, "
        "320 of 576 tokens short"
    )
    assert [(t.session_id, t.cached_tokens) for t in found.short_turns] == [("s1", 0), ("s2", 64)]


def test_a_warm_first_turn_after_a_reset_is_named() -> None:
    found = reconcile_prefix_reuse(sessions([192], first_cached=96), 16, cold_start_expected=True)
    assert found.prefix_reuse_reconciled is Verdict.FAIL
    assert found.cause == "warm_first_turn"
    assert "s0 read 96, at most 5 shared with earlier prompts" in found.reason
    # Without a reset the first turns are not judged.
    unreset = reconcile_prefix_reuse(sessions([192], first_cached=96), 16, False)
    assert unreset.prefix_reuse_reconciled is Verdict.PASS


def test_unknown_when_the_server_reports_no_cached_tokens() -> None:
    found = reconcile_prefix_reuse(sessions([math.nan], first_cached=math.nan), 16, True)
    assert found.prefix_reuse_reconciled is Verdict.UNKNOWN
    assert "reports no cached prompt tokens" in found.reason


def test_failed_turns_are_not_judged() -> None:
    observations = sessions([192, 0])
    failed = TurnObservation(**{**observations[3].__dict__, "succeeded": False})
    found = reconcile_prefix_reuse([*observations[:3], failed], 16, True)
    assert found.prefix_reuse_reconciled is Verdict.PASS
    assert found.later_turns == 1

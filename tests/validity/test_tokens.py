"""Token fidelity: prompt tokens off by +N and outputs shorter than asked flip the verdicts."""

from __future__ import annotations

import numpy as np

from inferlab_bench.validity import (
    TokenTolerance,
    Verdict,
    reconcile_output_tokens,
    reconcile_prompt_tokens,
)
from tests.validity.builders import T0, ids, records

N = 20
STARTS = T0 + np.arange(N, dtype=np.int64) * 10**7
PROMPTS = {sid: 100 + i for i, sid in enumerate(ids(N))}
OUTPUTS = {sid: 10 + i % 3 for i, sid in enumerate(ids(N))}


def test_exact_prompt_tokens_reconcile() -> None:
    result = reconcile_prompt_tokens(
        records(STARTS, prompt=np.array(list(PROMPTS.values()))), PROMPTS
    )
    assert result.verdict is Verdict.PASS
    assert (result.compared, result.mismatched) == (N, 0)


def test_prompt_tokens_off_by_plus_eight_fail() -> None:
    reported = np.array(list(PROMPTS.values())) + 8.0
    result = reconcile_prompt_tokens(records(STARTS, prompt=reported), PROMPTS)
    assert result.verdict is Verdict.FAIL
    assert (result.mismatched, result.longer, result.shorter) == (N, N, 0)
    assert result.difference is not None and result.difference.p50 == 8.0


def test_prompt_tokens_must_agree_exactly() -> None:
    reported = np.array(list(PROMPTS.values()), dtype=float)
    reported[3] += 1
    result = reconcile_prompt_tokens(records(STARTS, prompt=reported), PROMPTS)
    assert result.verdict is Verdict.FAIL
    assert (result.mismatched, result.constant_offset) == (1, None)


def test_a_constant_offset_is_named_whatever_the_prompt_lengths() -> None:
    """A BOS on every request: +1 on 1000-token prompts is 0.1%, and still a failure."""
    long = {sid: 1000 + i for i, sid in enumerate(ids(N))}
    reported = np.array(list(long.values()), dtype=float) + 1
    loose = TokenTolerance(rel=0.01)
    for tol in (TokenTolerance(rel=0.0), loose):
        result = reconcile_prompt_tokens(records(STARTS, prompt=reported), long, tol)
        assert result.verdict is Verdict.FAIL
        assert result.constant_offset == 1
        assert "constant offset" in result.check.detail
        assert "+1 tokens on every one of 20 requests" in result.check.detail


def test_a_drift_within_an_explicit_tolerance_passes() -> None:
    big = {sid: 1000 + i for i, sid in enumerate(ids(N))}
    reported = np.array(list(big.values()), dtype=float)
    reported[::2] += 9
    loose = TokenTolerance(rel=0.01)
    result = reconcile_prompt_tokens(records(STARTS, prompt=reported), big, loose)
    assert result.verdict is Verdict.PASS and result.constant_offset is None


def test_a_mismatch_share_can_be_tolerated() -> None:
    reported = np.array(list(PROMPTS.values()), dtype=float)
    reported[0] += 50
    tol = TokenTolerance(max_mismatch_fraction=0.1)
    column = records(STARTS, prompt=reported)
    assert reconcile_prompt_tokens(column, PROMPTS).verdict is Verdict.FAIL
    assert reconcile_prompt_tokens(column, PROMPTS, tol).verdict is Verdict.PASS


def test_failed_requests_are_not_compared() -> None:
    ok = np.ones(N, dtype=bool)
    ok[:5] = False
    reported = np.array(list(PROMPTS.values()), dtype=float)
    reported[:5] = np.nan
    result = reconcile_prompt_tokens(records(STARTS, prompt=reported, succeeded=ok), PROMPTS)
    assert result.verdict is Verdict.PASS and result.compared == N - 5


def test_unreported_or_unplanned_counts_are_unknown() -> None:
    assert reconcile_prompt_tokens(records(STARTS), None).verdict is Verdict.UNKNOWN
    result = reconcile_prompt_tokens(records(STARTS, prompt=np.nan), PROMPTS)
    assert result.verdict is Verdict.UNKNOWN and result.missing_reported == N


def test_outputs_as_asked_are_honored() -> None:
    got = np.array(list(OUTPUTS.values()), dtype=float)
    assert reconcile_output_tokens(records(STARTS, output=got), OUTPUTS).verdict is Verdict.PASS


def test_outputs_shorter_than_asked_fail() -> None:
    got = np.array(list(OUTPUTS.values()), dtype=float)
    got[::2] = 3
    result = reconcile_output_tokens(records(STARTS, output=got), OUTPUTS)
    assert result.verdict is Verdict.FAIL
    assert (result.shorter, result.longer, result.mismatched) == (N // 2, 0, N // 2)
    assert result.difference is not None and result.difference.minimum < 0

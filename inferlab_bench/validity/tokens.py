"""Token fidelity: prompt tokens the server counted vs the population, outputs asked vs got.

Only succeeded requests are compared. A request matches when its difference is within
``abs_tokens + rel * expected``; the verdict holds when the share of mismatching requests
is at most ``max_mismatch_fraction``. Prompt tokens must agree exactly by default, because
both sides render the same chat template with the same tokenizer: any drift means a wrong
tokenizer or template on one side. A difference that is the same on every request (a BOS
token, a default system prompt the server adds) is named as a constant offset, whatever
the prompt lengths: a relative allowance would hide it behind long prompts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from inferlab_bench.validity.distribution import Distribution, describe
from inferlab_bench.validity.inputs import BoolArray, FloatArray, PhaseRecords, lookup
from inferlab_bench.validity.verdict import Check, Figures, Verdict, at_most, unknown


@dataclass(frozen=True)
class TokenTolerance:
    """Per-request allowance and the share of requests allowed outside it."""

    abs_tokens: float = 0.0
    rel: float = 0.01
    max_mismatch_fraction: float = 0.0


class TokenReconciliation(Figures):
    """Expected vs reported tokens per request, summarized, with one verdict."""

    verdict: Verdict
    compared: int
    missing_expected: int
    missing_reported: int
    mismatched: int
    shorter: int
    longer: int
    difference: Distribution | None
    relative_difference: Distribution | None
    check: Check
    constant_offset: int | None = None
    """The difference when every compared request is off by the same non-zero count."""


def within(reported: FloatArray, expected: FloatArray, tol: TokenTolerance) -> BoolArray:
    """Per request: is |reported - expected| inside the allowance?"""
    allowance = tol.abs_tokens + tol.rel * np.abs(expected)
    return np.abs(reported - expected) <= allowance


def reconcile(
    name: str, reported: FloatArray, expected: FloatArray, tol: TokenTolerance
) -> TokenReconciliation:
    """Compare two per-request token columns (NaN = absent on that side)."""
    have_expected, have_reported = np.isfinite(expected), np.isfinite(reported)
    both = have_expected & have_reported
    diff = reported[both] - expected[both]
    bad = ~within(reported[both], expected[both], tol)
    fraction = float(bad.mean()) if both.any() else None
    offset = constant_offset(diff)
    check = _check(name, fraction, tol, int(both.sum()), offset)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = diff / expected[both]
    return TokenReconciliation(
        verdict=check.verdict,
        compared=int(both.sum()),
        missing_expected=int((~have_expected).sum()),
        missing_reported=int((have_expected & ~have_reported).sum()),
        mismatched=int(bad.sum()),
        shorter=int((diff < 0).sum()),
        longer=int((diff > 0).sum()),
        difference=describe(diff),
        relative_difference=describe(relative),
        check=check,
        constant_offset=offset,
    )


def constant_offset(difference: FloatArray) -> int | None:
    """The one non-zero difference every request shares (None when they differ, or agree)."""
    if difference.size == 0 or not np.all(difference == difference[0]) or difference[0] == 0:
        return None
    return int(difference[0])


def _check(
    name: str, fraction: float | None, tol: TokenTolerance, compared: int, offset: int | None
) -> Check:
    if fraction is None:
        return unknown(name, "no request has both an expected and a reported count")
    detail = (
        f"share of {compared} requests off by more than "
        f"{tol.abs_tokens:g} + {tol.rel:g} * expected tokens"
    )
    if offset is not None:
        detail = (
            f"constant offset: the server counts {offset:+d} tokens on every one of "
            f"{compared} requests (a BOS token or a default system prompt it adds?); " + detail
        )
        # An offset on every request is systematic however small against long prompts.
        return at_most(name, 1.0, tol.max_mismatch_fraction, detail)
    return at_most(name, fraction, tol.max_mismatch_fraction, detail)


def reconcile_prompt_tokens(
    records: PhaseRecords,
    expected_input: Mapping[str, int] | None,
    tol: TokenTolerance = TokenTolerance(rel=0.0),
) -> TokenReconciliation:
    """Server ``usage.prompt_tokens`` vs the population's rendered input tokens."""
    return _reconcile_column(
        "prompt_tokens_reconciled", records, records.prompt_tokens, expected_input, tol
    )


def reconcile_output_tokens(
    records: PhaseRecords,
    expected_output: Mapping[str, int] | int | None,
    tol: TokenTolerance = TokenTolerance(rel=0.0),
) -> TokenReconciliation:
    """Received output tokens vs requested: per session, or one count for every request."""
    return _reconcile_column(
        "output_lengths_honored", records, records.output_tokens, expected_output, tol
    )


def _reconcile_column(
    name: str,
    records: PhaseRecords,
    column: FloatArray,
    expected: Mapping[str, int] | int | None,
    tol: TokenTolerance,
) -> TokenReconciliation:
    ok = records.succeeded
    if isinstance(expected, int):
        planned = np.full(int(ok.sum()), float(expected))
    else:
        ids = tuple(sid for sid, keep in zip(records.session_ids, ok, strict=True) if keep)
        planned = lookup(expected or {}, ids)
    return reconcile(name, column[ok], planned, tol)

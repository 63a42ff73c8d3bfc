"""Verdicts: the four states of a check, one check's figures, and how checks combine."""

from __future__ import annotations

import enum
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict


class Verdict(enum.StrEnum):
    """What the evidence says about one property of a measurement."""

    PASS = "pass"
    FAIL = "fail"
    UNKNOWN = "unknown"
    NOT_APPLICABLE = "not_applicable"


class Figures(BaseModel):
    """Base of every result model in validity.json: frozen, strict about its own fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Check(Figures):
    """One named test with its verdict, the value found, the bound it was held to, and why."""

    name: str
    verdict: Verdict
    observed: float | None = None
    bound: float | None = None
    detail: str = ""


def combine(verdicts: Iterable[Verdict]) -> Verdict:
    """Any fail fails; else any unknown is unknown; all not-applicable stays so; else pass."""
    seen = set(verdicts)
    if Verdict.FAIL in seen:
        return Verdict.FAIL
    if Verdict.UNKNOWN in seen:
        return Verdict.UNKNOWN
    if seen <= {Verdict.NOT_APPLICABLE}:
        return Verdict.NOT_APPLICABLE
    return Verdict.PASS


def combine_checks(checks: Iterable[Check]) -> Verdict:
    """The combined verdict of several checks."""
    return combine(check.verdict for check in checks)


def at_most(name: str, observed: float | None, bound: float, detail: str = "") -> Check:
    """A check that passes when ``observed <= bound``; unknown when nothing was observed."""
    if observed is None:
        return Check(name=name, verdict=Verdict.UNKNOWN, bound=bound, detail=detail)
    verdict = Verdict.PASS if observed <= bound else Verdict.FAIL
    return Check(name=name, verdict=verdict, observed=observed, bound=bound, detail=detail)


def at_least(name: str, observed: float | None, bound: float, detail: str = "") -> Check:
    """A check that passes when ``observed >= bound``; unknown when nothing was observed."""
    if observed is None:
        return Check(name=name, verdict=Verdict.UNKNOWN, bound=bound, detail=detail)
    verdict = Verdict.PASS if observed >= bound else Verdict.FAIL
    return Check(name=name, verdict=verdict, observed=observed, bound=bound, detail=detail)


def not_applicable(name: str, detail: str) -> Check:
    """A check that does not apply to this case (the reason in ``detail``)."""
    return Check(name=name, verdict=Verdict.NOT_APPLICABLE, detail=detail)


def unknown(name: str, detail: str) -> Check:
    """A check that applies but cannot be decided from the evidence (the reason in ``detail``)."""
    return Check(name=name, verdict=Verdict.UNKNOWN, detail=detail)

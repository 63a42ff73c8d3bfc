"""Rules between flags (exactly one of, needs, cannot be combined, at most), kept as data.

A rule names fields, never flags; the CLI turns the fields into flag names. Each rule can
also say how to break it (``violation``), so a test generates one bad command per rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel
from pydantic_core import PydanticCustomError

from inferlab_bench.cli.wording import RULE_ERROR

GOOD = "<good>"
"""In a violation: give this field a valid value of its own kind."""


def rule_error(template: str, fields: tuple[str, ...], hint: str) -> PydanticCustomError:
    """``template`` names the fields as {0}, {1}...; the ctx carries them for the CLI."""
    return PydanticCustomError(
        RULE_ERROR,
        template,
        {"fields": fields, "template": template, "hint": hint},
    )


def given(model: BaseModel, field: str, value: object = None) -> bool:
    """Was the flag given (and, if ``value`` is set, given with that value)?"""
    if field not in model.model_fields_set:
        return False
    return value is None or getattr(model, field) == value


class Rule(Protocol):
    def broken(self, model: BaseModel) -> PydanticCustomError | None:
        """The error when ``model`` breaks the rule, else None."""
        ...

    def violation(self) -> Mapping[str, str | None]:
        """Flag values that break the rule: a value, ``GOOD``, or None to leave a flag out."""
        ...


def _label(field: str, value: object) -> str:
    return field if value is None else f"{field}={value}"


@dataclass(frozen=True)
class OneOf:
    """Exactly one of ``fields`` (or at most one when not ``required``)."""

    fields: tuple[str, ...]
    hint: str
    required: bool = True

    def broken(self, model: BaseModel) -> PydanticCustomError | None:
        chosen = tuple(f for f in self.fields if given(model, f) and getattr(model, f) is not False)
        if len(chosen) > 1:
            return rule_error("{0} cannot be combined with {1}", chosen[:2], self.hint)
        if not chosen and self.required:
            names = ", ".join(f"{{{i}}}" for i in range(len(self.fields)))
            return rule_error(f"give exactly one of {names}", self.fields, self.hint)
        return None

    def violation(self) -> Mapping[str, str | None]:
        return {self.fields[0]: GOOD, self.fields[1]: GOOD}


@dataclass(frozen=True)
class Needs:
    """``field`` (given with value ``when``, if set) needs one of ``needs`` (with ``value``)."""

    field: str
    needs: tuple[str, ...]
    hint: str
    when: object = None
    value: object = None

    def broken(self, model: BaseModel) -> PydanticCustomError | None:
        if not given(model, self.field, self.when) or getattr(model, self.field) is False:
            return None
        if any(given(model, other, self.value) for other in self.needs):
            return None
        first = "{0}" if self.when is None else f"{{0}} {self.when}"
        wanted = " or ".join(f"{{{i + 1}}}" for i in range(len(self.needs)))
        if self.value is not None:
            wanted += f" {self.value}"
        return rule_error(f"{first} needs {wanted}", (self.field, *self.needs), self.hint)

    def violation(self) -> Mapping[str, str | None]:
        bad: dict[str, str | None] = {other: None for other in self.needs}
        bad[self.field] = GOOD if self.when is None else str(self.when)
        return bad


@dataclass(frozen=True)
class Conflicts:
    """``first`` and ``second`` cannot be given together."""

    first: str
    second: str
    hint: str

    def broken(self, model: BaseModel) -> PydanticCustomError | None:
        if given(model, self.first) and given(model, self.second):
            return rule_error(
                "{0} cannot be combined with {1}", (self.first, self.second), self.hint
            )
        return None

    def violation(self) -> Mapping[str, str | None]:
        return {self.first: GOOD, self.second: GOOD}


@dataclass(frozen=True)
class AtMost:
    """Each value of ``field`` (a number or a list) is at most the value of ``limit``."""

    field: str
    limit: str
    hint: str

    def broken(self, model: BaseModel) -> PydanticCustomError | None:
        value, limit = getattr(model, self.field), getattr(model, self.limit)
        values = value if isinstance(value, list) else [value]
        if any(v is not None and v > limit for v in values):
            template = f"{{0}}: expected at most {{1}} ({limit})"
            return rule_error(template, (self.field, self.limit), self.hint)
        return None

    def violation(self) -> Mapping[str, str | None]:
        return {self.limit: "2", self.field: "3"}


@dataclass(frozen=True)
class Repeated:
    """``field`` given more than once (a list) needs ``needs`` given with ``value``."""

    field: str
    needs: str
    value: str
    hint: str

    def broken(self, model: BaseModel) -> PydanticCustomError | None:
        if len(getattr(model, self.field)) > 1 and not given(model, self.needs, self.value):
            template = f"{{0}} given more than once needs {{1}} {self.value}"
            return rule_error(template, (self.field, self.needs), self.hint)
        return None

    def violation(self) -> Mapping[str, str | None]:
        return {self.field: "<twice>", self.needs: None}


@dataclass(frozen=True)
class Required:
    """``fields`` are needed unless ``unless`` is given (another mode of the command)."""

    fields: tuple[str, ...]
    unless: str
    hint: str

    def broken(self, model: BaseModel) -> PydanticCustomError | None:
        if given(model, self.unless):
            return None
        missing = tuple(f for f in self.fields if not given(model, f))
        if not missing:
            return None
        names = ", ".join(f"{{{i}}}" for i in range(len(missing)))
        template = f"give {names} (or {{{len(missing)}}})"
        return rule_error(template, (*missing, self.unless), self.hint)

    def violation(self) -> Mapping[str, str | None]:
        return {self.fields[0]: None, self.unless: None}


def check(model: BaseModel, rules: tuple[Rule, ...]) -> None:
    """Raise the first broken rule's error."""
    for rule in rules:
        if (error := rule.broken(model)) is not None:
            raise error

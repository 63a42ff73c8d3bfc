"""What a peer's result file becomes: cases in our metric names, and the bounded types every
value read from a stranger's file passes through before it is used."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferlab_bench.errors import BaselineError

# Bounds chosen, not measured: generous beyond any real run, tight enough that a figure
# which passes them can be compared (no 1e308, no negative latency, no count that makes an
# array of a billion values).
MAX_MS = 1.0e8
"""A latency of 27.8 hours."""
MAX_RATE = 1.0e9
"""Requests or tokens per second."""
MAX_COUNT = 10_000_000
MAX_REQUESTS_KEPT = 1_000_000
"""Per-request values read from one benchmark (a 100k-request vLLM file is 3.8 MB)."""
MAX_EPOCH_S = 1.0e11
MAX_TEXT = 1024

Ms = Annotated[float, Field(ge=0.0, le=MAX_MS, allow_inf_nan=False)]
Seconds = Annotated[float, Field(ge=0.0, le=MAX_MS / 1000.0, allow_inf_nan=False)]
PerSecond = Annotated[float, Field(ge=0.0, le=MAX_RATE, allow_inf_nan=False)]
Epoch = Annotated[float, Field(ge=0.0, le=MAX_EPOCH_S, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]

M = TypeVar("M", bound=BaseModel)


class Foreign(BaseModel):
    """A stranger's record: only the fields we use, each strictly typed and bounded."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


def parse(model: type[M], data: Any, path: Path, where: str = "") -> M:
    """``data`` as ``model``, or a one-line BaselineError naming the field and what was found."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"] if not _is_type_tag(p))
        field_name = f"{where}.{loc}" if where and loc else (where or loc or "(top level)")
        found = short(first.get("input"))
        raise BaselineError(
            f"{path}: {field_name}: {first['msg'].lower()}, found {found}",
            hint="the file is not what its tool writes; fix or re-create it",
        ) from None


def _is_type_tag(part: str | int) -> bool:
    """pydantic names the member of a union it tried (``float``, ``literal['inf']``)."""
    return isinstance(part, str) and (part in _TYPE_TAGS or "[" in part or "-" in part)


_TYPE_TAGS = frozenset({"float", "int", "str", "bool", "list", "dict", "none"})


def short(value: Any) -> str:
    """A found value for a one-line message: containers by their size, text cut at 60."""
    if isinstance(value, list | dict):
        return f"a {type(value).__name__} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


Samples = dict[str, npt.NDArray[np.float64]]


@dataclass(frozen=True)
class BaselineCase:
    """One benchmark (one load) of a peer's file, in our names.

    ``runs`` holds each run's figures (several when the file keeps repeated runs of one
    load, as ``vllm bench sweep``'s summary.json does); ``refusals`` say why the case
    cannot be compared at all; ``notes`` are said beside the verdicts.
    """

    label: str
    runs: tuple[Mapping[str, float], ...]
    samples: tuple[Samples, ...] | None
    model: str | None
    requests: int | None
    unmapped: tuple[str, ...] = ()
    refusals: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def metrics(self) -> dict[str, float]:
        """The figures shown for this case: the run's own, or the mean over its runs."""
        shared = set.intersection(*(set(r) for r in self.runs)) if self.runs else set()
        return {k: float(np.mean([r[k] for r in self.runs])) for k in sorted(shared)}


@dataclass(frozen=True)
class Baseline:
    tool: str
    version: str | None
    path: Path
    cases: tuple[BaselineCase, ...]
    format: str = ""

    def case(self, label: str) -> BaselineCase | None:
        return next((c for c in self.cases if c.label == label), None)


@dataclass
class Figures:
    """Accumulates the figures of one run, keeping only values the bounded types allowed."""

    values: dict[str, float] = field(default_factory=dict)

    def put(self, name: str, value: float | None) -> None:
        if value is not None:
            self.values[name] = float(value)

    def put_all(self, names: Sequence[tuple[str, float | None]]) -> None:
        for name, value in names:
            self.put(name, value)

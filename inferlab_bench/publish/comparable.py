"""Whether two saved cases measured the same thing (pure): why not, and what to say beside it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inferlab_bench.load import Load
from inferlab_bench.protocol import ClientStatus
from inferlab_bench.publish.verdict import Side
from inferlab_bench.report.figures import latency_samples
from inferlab_bench.report.rundir import SavedCase

# Verdicts that change what was measured: a difference there makes the numbers incomparable.
SUBSTANTIVE = (
    "requests_succeeded",
    "prompt_tokens_reconciled",
    "output_lengths_honored",
    "cache_cold",
)
# Verdicts about the client's own timing: reported beside the numbers, which stay comparable.
CAVEATS = ("load_generator_kept_up",)


@dataclass(frozen=True)
class Identity:
    """What a side says it measured (from its requests, results and validity)."""

    served_name: str | None
    tokenizer_fingerprint: str | None
    population_sha256: str | None
    load: str | None
    requests: int | None
    warmup: int | None
    verdicts: Mapping[str, str]
    failed: bool


def identity(cases: Sequence[SavedCase], fingerprint: str | None) -> Identity:
    """A side's identity from its first case (its trials share one request)."""
    first = cases[0]
    request = first.request
    verdicts: dict[str, str] = {}
    for case in cases:
        for name, value in ((case.validity or {}).get("verdicts") or {}).items():
            verdicts[name] = "fail" if "fail" in (value, verdicts.get(name)) else str(value)
    return Identity(
        served_name=None if request is None else request.model.served_name,
        tokenizer_fingerprint=fingerprint,
        population_sha256=None
        if request is None or request.population is None
        else request.population.sha256,
        load=None if request is None else Load.of(request.case.load_shape).label,
        requests=None if request is None else request.case.request_count,
        warmup=None if request is None else request.case.warmup_request_count,
        verdicts=verdicts,
        failed=any(c.result.status is not ClientStatus.SUCCEEDED for c in cases),
    )


def differences(published: Identity, reproduced: Identity) -> list[str]:
    """Why the two sides are not comparable (empty when they are)."""
    out: list[str] = []
    for field, what in (
        ("served_name", "server's model"),
        ("tokenizer_fingerprint", "tokenizer fingerprint"),
        ("population_sha256", "population sha256"),
        ("load", "load"),
        ("requests", "request count"),
        ("warmup", "warmup count"),
    ):
        a, b = getattr(published, field), getattr(reproduced, field)
        if a is not None and b is not None and a != b:
            out.append(f"{what} differs: published {a}, reproduced {b}")
    for side, ident in (("published", published), ("reproduced", reproduced)):
        if ident.failed:
            out.append(f"the {side} case failed")
    for name in SUBSTANTIVE:
        a, b = published.verdicts.get(name), reproduced.verdicts.get(name)
        if a is not None and b is not None and a != b:
            out.append(f"validity {name} differs: published {a}, reproduced {b}")
    return out


def caveats(published: Identity, reproduced: Identity) -> list[str]:
    out = []
    for name in CAVEATS:
        for side, ident in (("published", published), ("reproduced", reproduced)):
            if ident.verdicts.get(name) == "fail":
                out.append(f"{side}: {name} failed (its latencies include client-side delay)")
    return out


def side(cases: Sequence[SavedCase]) -> Side:
    """The verdict module's view of saved cases: metrics per trial and per-request values."""
    samples = tuple(latency_samples(c) for c in cases)
    return Side(
        metrics=tuple(dict(c.result.metrics) for c in cases),
        samples=samples if all(samples) else (),
    )


def as_document(value: Any) -> Any:
    """Dataclasses, tuples and mappings as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_document(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): as_document(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_document(v) for v in value]
    return value

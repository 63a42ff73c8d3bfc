"""A bundle's cases as its checksummed members say, never as its unchecked index says.

BUNDLE.json is not itself covered by a digest, so its ``cases`` (directories, trials, load
labels, reset calls) are only a claim: the cases are rebuilt from the members (each trial
directory's ``request.json``, each case's ``trials.json``, each trial's
``reset-evidence.json``) and the index must agree with them exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferlab_bench.case.reset import FRAMEWORK_RESETS
from inferlab_bench.errors import BundleError, InferlabError
from inferlab_bench.layout import REQUEST_FILE, RESET_EVIDENCE_FILE, TRIALS_FILE
from inferlab_bench.protocol import BenchClientRequest, describe_validation_error, parse_request
from inferlab_bench.publish.contents import INDEX_FILE, RUN_PREFIX
from inferlab_bench.publish.trust import MAX_TRIALS, BundleIndex, CaseEntry
from inferlab_bench.report.tables import load_label

DOCUMENTED_RESETS: dict[tuple[str, str], str] = {
    call: name for name, call in FRAMEWORK_RESETS.items() if call is not None
}
"""(method, path) -> the framework whose documented reset call it is."""
M = TypeVar("M", bound=BaseModel)
TrialName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")]


class _Lenient(BaseModel):
    """Our own files read back: the fields used are typed, the rest is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class TrialsListing(_Lenient):
    trials: Annotated[list[TrialName], Field(max_length=MAX_TRIALS)]


class ResetTargetRecord(_Lenient):
    method: Annotated[str, Field(max_length=16)]
    path: Annotated[str, Field(max_length=512)]


class ResetEvidence(_Lenient):
    target: ResetTargetRecord | None = None


@dataclass(frozen=True)
class ResetClaim:
    """The reset a case made, from its checksummed evidence."""

    method: str
    path: str

    @property
    def text(self) -> str:
        return f"{self.method}:{self.path}"

    @property
    def framework(self) -> str | None:
        """The documented framework name of this call (None when it is none of them)."""
        return DOCUMENTED_RESETS.get((self.method, self.path))


@dataclass(frozen=True)
class BundleCase:
    """One case of a verified bundle: where it lies in the bundle, its trials and request."""

    path: str
    label: str
    trials: tuple[str, ...]
    requests: tuple[BenchClientRequest, ...]
    """One per trial, in the order of ``trials``."""
    reset: ResetClaim | None

    @property
    def request(self) -> BenchClientRequest:
        return self.requests[0]


def member_model(where: Path, name: str, data: bytes, model: type[M]) -> M:
    """A member parsed into ``model``, or one BundleError naming the member and the field."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise BundleError(
            f"{where}: member {name} is not a valid {model.__name__}: "
            f"{describe_validation_error(exc, limit=2)}",
            hint="the bundle was not made by `inferlab-bench bundle` or was altered before signing",
        ) from exc


def bundle_cases(where: Path, index: BundleIndex, members: Mapping[str, bytes]) -> list[BundleCase]:
    """The cases the members hold; refused when BUNDLE.json says anything else."""
    derived = [_case(where, path, trials, members) for path, trials in _layout(where, members)]
    if not derived:
        raise BundleError(
            f"{where}: the bundle holds no case (no {RUN_PREFIX}/.../{REQUEST_FILE})",
            hint="bundle the --out directory of `inferlab-bench run` or `sweep`",
        )
    claimed = [_claim(c) for c in index.cases]
    found = [_claim(_as_entry(c)) for c in derived]
    if claimed != found:
        first = next(
            (i for i, (a, b) in enumerate(zip(claimed, found, strict=False)) if a != b),
            min(len(claimed), len(found)),
        )
        said = claimed[first] if first < len(claimed) else "nothing"
        held = found[first] if first < len(found) else "nothing"
        raise BundleError(
            f"{where}: {INDEX_FILE} cases[{first}] says {said}, the members hold {held}",
            hint="the index was edited after the bundle was made; only checksummed files count",
        )
    return derived


def _layout(where: Path, members: Mapping[str, bytes]) -> list[tuple[str, tuple[str, ...]]]:
    """(case directory, trial directories) for every case, in path order."""
    trial_dirs = {
        PurePosixPath(n).parent.as_posix()
        for n in members
        if n == f"{RUN_PREFIX}/{REQUEST_FILE}"
        or (n.startswith(f"{RUN_PREFIX}/") and n.endswith(f"/{REQUEST_FILE}"))
    }
    cases: dict[str, tuple[str, ...]] = {}
    for name in sorted(n for n in members if n.endswith(f"/{TRIALS_FILE}")):
        directory = PurePosixPath(name).parent.as_posix()
        listing = member_model(where, name, members[name], TrialsListing)
        trials = tuple(
            f"{directory}/{t}" for t in listing.trials if f"{directory}/{t}" in trial_dirs
        )
        if trials:
            cases[directory] = trials
    claimed = {t for trials in cases.values() for t in trials}
    for directory in trial_dirs - claimed:
        cases[directory] = (directory,)
    return sorted(cases.items())


def _case(
    where: Path, path: str, trials: tuple[str, ...], members: Mapping[str, bytes]
) -> BundleCase:
    requests = [_request(where, f"{t}/{REQUEST_FILE}", members) for t in trials]
    resets = {_reset(where, t, members) for t in trials}
    if len(resets) > 1:
        raise BundleError(
            f"{where}: the trials of {path} record different reset calls "
            f"({', '.join(sorted(r.text if r else 'none' for r in resets))})"
        )
    return BundleCase(path, load_label(requests[0]), trials, tuple(requests), resets.pop())


def _request(where: Path, name: str, members: Mapping[str, bytes]) -> BenchClientRequest:
    try:
        return parse_request(BenchClientRequest, members[name])
    except InferlabError as exc:
        raise BundleError(f"{where}: member {name}: {exc.message}") from exc


def _reset(where: Path, trial: str, members: Mapping[str, bytes]) -> ResetClaim | None:
    name = f"{trial}/{RESET_EVIDENCE_FILE}"
    if name not in members:
        return None
    target = member_model(where, name, members[name], ResetEvidence).target
    return None if target is None else ResetClaim(target.method, target.path)


def _as_entry(case: BundleCase) -> CaseEntry:
    reset = None if case.reset is None else case.reset.text
    return CaseEntry(path=case.path, label=case.label, trials=list(case.trials), reset=reset)


def _claim(entry: CaseEntry) -> str:
    reset = entry.reset or "no reset"
    return f"{entry.path} ({entry.label}, trials {', '.join(entry.trials)}, {reset})"

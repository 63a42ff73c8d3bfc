"""Reading a bundle without trusting it: streamed with caps, checked against itself, safe unpack.

``read_bundle`` is the trust boundary. The archive streams through ``stream`` (caps, member
headers, digests); the cases come from checksummed members (``evidence``), never from the
unchecked index; every result.json is recomputed from its records (``consistency``); the
population's digest is checked everywhere it is named. Only then may anything be written,
and then only under the target, by our atomic writer.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.errors import BundleError
from inferlab_bench.protocol import BenchClientRequest
from inferlab_bench.publish.consistency import check_trial
from inferlab_bench.publish.contents import INDEX_FILE, REPORT_FILE
from inferlab_bench.publish.evidence import BundleCase, bundle_cases
from inferlab_bench.publish.stream import Caps, member_problem, stream_members
from inferlab_bench.publish.trust import BundleIndex

__all__ = ["Bundle", "member_problem", "read_bundle", "unpack"]

NEVER_UNPACKED = frozenset({REPORT_FILE})
"""A page in a bundle is the stranger's, not ours: it is verified but never written out
(``report --html`` on the unpacked folder renders our own)."""


@dataclass(frozen=True)
class Bundle:
    """A verified bundle: its typed index, its cases (from its members) and every member."""

    path: Path
    typed: BundleIndex
    cases: tuple[BundleCase, ...]
    members: dict[str, bytes]
    recomputed: int = 0
    """How many trials' figures were recomputed from their records (all, with records)."""

    @property
    def index(self) -> dict[str, Any]:
        return self.typed.document()

    @property
    def trials(self) -> int:
        return sum(len(c.trials) for c in self.cases)

    def request(self, trial: str) -> BenchClientRequest:
        for case in self.cases:
            if trial in case.trials:
                return case.requests[case.trials.index(trial)]
        raise KeyError(trial)


def read_bundle(path: Path, caps: Caps | None = None) -> Bundle:
    """Verify ``path`` whole before anything is used; raise naming the first thing that lies."""
    index, members = stream_members(path, caps)
    cases = tuple(bundle_cases(path, index, members))
    recomputed = sum(
        check_trial(path, trial, members, case.request) for case in cases for trial in case.trials
    )
    bundle = Bundle(path, index, cases, members, recomputed)
    _check_population(bundle)
    return bundle


def unpack(bundle: Bundle, target: Path) -> Path:
    """Write every member of a verified bundle under ``target`` (each write atomic)."""
    root = target.resolve()
    for name, data in sorted(bundle.members.items()):
        if name in NEVER_UNPACKED:
            continue
        destination = (root / name).resolve()
        if not destination.is_relative_to(root):  # a planted link in target itself
            raise BundleError(f"{bundle.path}: member {name} would be written outside {root}")
        write_bytes_atomic(destination, data)
    write_bytes_atomic(root / INDEX_FILE, orjson.dumps(bundle.index, option=orjson.OPT_INDENT_2))
    return root


def _check_population(bundle: Bundle) -> None:
    """The population's bytes hash to the digest the index, its .sha256 and every case name."""
    entry = bundle.typed.population
    requests = [r for c in bundle.cases for r in c.requests]
    if entry is None:
        if any(r.population is not None for r in requests):
            raise BundleError(f"{bundle.path}: the cases replay a population the index omits")
        return
    name = entry.path
    if name not in bundle.members:
        raise BundleError(f"{bundle.path}: population {name} is not a member of the bundle")
    actual = hashlib.sha256(bundle.members[name]).hexdigest()
    claims = {f"{INDEX_FILE} population.sha256": entry.sha256}
    sha_file = name.rsplit("/", 1)[0] + "/population.sha256"
    if sha_file in bundle.members:
        claims[sha_file] = (bundle.members[sha_file].decode(errors="replace").split() or [""])[0]
    for case in bundle.cases:
        for trial, request in zip(case.trials, case.requests, strict=True):
            if request.population is not None:
                claims[f"{trial}/request.json population.sha256"] = request.population.sha256
    for where, claimed in claims.items():
        if claimed != actual:
            raise BundleError(
                f"{bundle.path}: population {name} has sha256 {actual}, {where} says {claimed}",
                hint="the bundle does not hold the population its cases ran with",
            )

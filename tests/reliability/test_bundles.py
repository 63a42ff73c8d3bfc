"""Fault matrix of crafted bundles: each one is refused with one line naming what lies, or
verified when it is honest, and no file anywhere around it changes.

Every variant starts from a real bundle of a real sweep against the simulator. ``bundle
--verify`` runs in process; the file system around the crafted archive (the archive, a
neighbour folder holding the user's files) is listed before and after.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from inferlab_bench.cli import main
from tests.publish.support import published_bundle
from tests.reliability import bundles as b
from tests.reliability.targets import fingerprint

Craft = Callable[[b.Entries], b.Entries]
C1, C2 = b.C1, b.C2


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.pop(key) and None


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.__setitem__(key, value)


def _case(key: str, value: Any, which: int = 0) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["cases"][which].__setitem__(key, value)


def _member(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["members"][0].__setitem__(key, value)


def _population(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["population"].__setitem__(key, value)


def _metric(name: str, change: Callable[[float], float]) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["metrics"].__setitem__(name, change(d["metrics"][name]))


def _scale_latencies(factor: float) -> Callable[[dict[str, Any]], None]:
    def change(result: dict[str, Any]) -> None:
        for key in list(result["metrics"]):
            if key.endswith("_ttft_ms"):
                result["metrics"][key] *= factor

    return change


def _hostile_reset(entries: b.Entries) -> b.Entries:
    """A reset call that is none of the documented ones, consistent everywhere (re-signed)."""
    for trial in (C1, C2):
        entries = b.edit_json(
            f"{trial}/reset-evidence.json",
            lambda d: d.__setitem__(
                "target", {**d["target"], "method": "DELETE", "path": "/v1/models/sim"}
            ),
        )(entries)
    index = b.index_of(entries)
    for case in index["cases"]:
        case["reset"] = "DELETE:/v1/models/sim"
    return b.set_index(entries, index)


def _with(entry: b.Entry, listed: bool = False) -> Craft:
    return lambda entries: b.add(entries, entry, listed=listed)


def _index_last(entries: b.Entries) -> b.Entries:
    return [e for e in entries if e.name != b.INDEX] + [e for e in entries if e.name == b.INDEX]


def _no_index(entries: b.Entries) -> b.Entries:
    return [e for e in entries if e.name != b.INDEX]


def _duplicate(name: str) -> Craft:
    return lambda entries: [*entries, next(e for e in entries if e.name == name)]


def _drop_member(name: str) -> Craft:
    return lambda entries: [e for e in entries if e.name != name]


def _claims_more(name: str) -> Craft:
    """The header says the member is larger than BUNDLE.json lists."""

    def craft(entries: b.Entries) -> b.Entries:
        return [b.Entry(e.name, e.data + b" ") if e.name == name else e for e in entries]

    return craft


def _huge_header(entries: b.Entries) -> b.Entries:
    return [*entries, b.Entry("run/huge.bin", b"", size=3 * 1024**3)]


def _trials_listing(listing: Any) -> Craft:
    return lambda entries: b.add(
        entries, b.Entry(f"{C1}/trials.json", json.dumps(listing).encode())
    )


def _drop_column(column: str) -> Callable[[pa.Table], pa.Table]:
    return lambda t: t.drop_columns([column])


def _string_column(column: str) -> Callable[[pa.Table], pa.Table]:
    def change(t: pa.Table) -> pa.Table:
        index = t.column_names.index(column)
        return t.set_column(index, column, pa.array([str(v) for v in t.column(column).to_pylist()]))

    return change


def _negative_records(t: pa.Table) -> pa.Table:
    return b.scale_column("ttft_ms", -1.0)(t)


VARIANTS: dict[str, tuple[Craft, str | None]] = {
    # --- members that would land outside, or are not plain files ---
    "absolute-name": (_with(b.Entry("/tmp/inferlab-escape", b"x")), "has an absolute name"),
    "dotdot-name": (_with(b.Entry("run/../../escape", b"x")), "'..' component"),
    "dotdot-first": (_with(b.Entry("../escape", b"x")), "'..' component"),
    "symlink-out": (
        _with(b.Entry("run/link", kind=tarfile.SYMTYPE, link="/etc/passwd")),
        "is a link",
    ),
    "symlink-up": (_with(b.Entry("run/up", kind=tarfile.SYMTYPE, link="../../..")), "is a link"),
    "hardlink-index": (_with(b.Entry("run/hard", kind=tarfile.LNKTYPE, link=b.INDEX)), "is a link"),
    "hardlink-out": (
        _with(b.Entry("run/pw", kind=tarfile.LNKTYPE, link="/etc/passwd")),
        "is a link",
    ),
    "char-device": (_with(b.Entry("run/dev", kind=tarfile.CHRTYPE)), "not a plain file"),
    "block-device": (_with(b.Entry("run/blk", kind=tarfile.BLKTYPE)), "not a plain file"),
    "fifo": (_with(b.Entry("run/fifo", kind=tarfile.FIFOTYPE)), "not a plain file"),
    "backslash-name": (_with(b.Entry("run\\..\\escape", b"x")), "backslash"),
    "control-char-name": (_with(b.Entry("run/\x1bx", b"x")), "control character"),
    "dot-component": (_with(b.Entry("./run/x", b"x")), "not a canonical relative name"),
    "empty-component": (_with(b.Entry("run//x", b"x")), "not a canonical relative name"),
    "long-name": (_with(b.Entry("run/" + "x" * 600, b"x")), "1 to 512 characters"),
    # --- members against the index ---
    "duplicate-member": (_duplicate(f"{C1}/result.json"), "appears twice"),
    "duplicate-index": (_duplicate(b.INDEX), "appears twice"),
    "unlisted-member": (_with(b.Entry("run/extra.json", b"{}")), "is not listed in BUNDLE.json"),
    "missing-member": (_drop_member(f"{C2}/validity.json"), "is listed in BUNDLE.json but missing"),
    "size-differs": (_claims_more(f"{C1}/request.json"), "bytes, BUNDLE.json says"),
    "sha-differs": (
        lambda e: b.put(e, f"{C1}/result.json", _get(e, f"{C1}/result.json").replace(b"ed", b"ED")),
        "differs: sha256",
    ),
    "huge-member-header": (_huge_header, "more than a bundle member may be"),
    "index-not-first": (_index_last, "not BUNDLE.json"),
    "no-index": (_no_index, "not BUNDLE.json"),
    "index-not-json": (
        lambda e: b.put(e, b.INDEX, b"{ nope"),
        "not a valid inferlab-bundle-v1 index",
    ),
    "index-a-list": (lambda e: b.set_index(e, []), "not a valid inferlab-bundle-v1 index"),
    # --- BUNDLE.json fields: missing, wrong type, out of range, escaping ---
    "schema-name": (b.edit_index(_set("schema_name", "other")), "schema_name"),
    "schema-version": (b.edit_index(_set("schema_version", 2)), "schema_version"),
    "cases-missing": (b.edit_index(_drop("cases")), "cases"),
    "cases-empty": (b.edit_index(_set("cases", [])), "cases"),
    "cases-a-string": (b.edit_index(_set("cases", "run")), "cases"),
    "case-path-absolute": (b.edit_index(_case("path", "/tmp/victim")), "absolute name"),
    "case-path-dotdot": (b.edit_index(_case("path", "../../victim")), "'..' component"),
    "case-path-inner-dotdot": (b.edit_index(_case("path", "run/../../victim")), "'..' component"),
    "case-path-other-case": (b.edit_index(_case("path", C2)), "cases[0] says"),
    "case-trials-empty": (b.edit_index(_case("trials", [])), "trials"),
    "case-trials-absolute": (b.edit_index(_case("trials", ["/etc"])), "absolute name"),
    "case-trials-int": (b.edit_index(_case("trials", [3])), "trials"),
    "case-label-markup": (
        b.edit_index(_case("label", "<script>alert(1)</script>")),
        "cases[0] says",
    ),
    "case-label-huge": (b.edit_index(_case("label", "x" * 5000)), "label"),
    "case-reset-lie": (b.edit_index(_case("reset", "DELETE:/v1/models/sim")), "cases[0] says"),
    "case-reset-int": (b.edit_index(_case("reset", 7)), "reset"),
    "case-extra-field": (b.edit_index(_case("command", "rm -rf /")), "command"),
    "case-dropped": (b.edit_index(lambda d: d["cases"].pop()), "cases[1] says"),
    "index-extra-field": (b.edit_index(_set("run_this", "curl evil")), "run_this"),
    "member-no-sha": (b.edit_index(lambda d: d["members"][0].pop("sha256")), "sha256"),
    "member-sha-not-hex": (b.edit_index(_member("sha256", "z" * 64)), "sha256"),
    "member-size-negative": (b.edit_index(_member("size", -1)), "size"),
    "member-size-float": (b.edit_index(_member("size", 1e308)), "size"),
    "member-path-absolute": (b.edit_index(_member("path", "/etc/passwd")), "absolute name"),
    "members-total-huge": (
        b.edit_index(lambda d: [m.__setitem__("size", 400 * 1024**2) for m in d["members"][:3]]),
        "more than",
    ),
    "population-sha-int": (b.edit_index(_population("sha256", 12)), "population.sha256"),
    "population-entries-negative": (b.edit_index(_population("entries", -5)), "entries"),
    "population-path-dotdot": (b.edit_index(_population("path", "../population.jsonl")), "'..'"),
    "population-omitted": (b.edit_index(_set("population", None)), "population the index omits"),
    "versions-nested": (b.edit_index(_set("versions", {"a": {"b": {"c": 1}}})), "versions"),
    "machine-many-keys": (
        b.edit_index(_set("machine", {str(i): i for i in range(100)})),
        "machine",
    ),
    # --- lying or damaged members, re-signed so every digest matches ---
    "result-ttft-divided": (
        b.edit_json(f"{C1}/result.json", _scale_latencies(1 / 20)),
        "does not match",
    ),
    "result-ttft-negative": (
        b.edit_json(f"{C1}/result.json", _scale_latencies(-1)),
        "does not match",
    ),
    "result-goodput-x10": (
        b.edit_json(f"{C2}/result.json", _metric("goodput", lambda v: v * 10)),
        "goodput",
    ),
    "result-throughput-x3": (
        b.edit_json(f"{C1}/result.json", _metric("request_throughput", lambda v: v * 3)),
        "request_throughput",
    ),
    "result-output-throughput-x2": (
        b.edit_json(f"{C1}/result.json", _metric("output_throughput", lambda v: v * 2)),
        "output_throughput",
    ),
    "result-p99-huge": (
        b.edit_json(f"{C2}/result.json", _metric("p99_ttft_ms", lambda v: 1e308)),
        "p99_ttft_ms",
    ),
    "result-completed-lie": (
        b.edit_json(f"{C1}/result.json", _set("completed_requests", 1200)),
        "completed",
    ),
    "result-count-string": (
        b.edit_json(f"{C1}/result.json", _set("completed_requests", "many")),
        "completed_requests",
    ),
    "result-not-json": (b.edit_bytes(f"{C1}/result.json", lambda d: d[:20]), "BenchClientResult"),
    "request-not-json": (b.edit_bytes(f"{C2}/request.json", lambda d: b"[]"), "request.json"),
    "request-field-missing": (b.edit_json(f"{C1}/request.json", _drop("case")), "case"),
    "request-other-population": (
        b.edit_json(
            f"{C2}/request.json", lambda d: d["population"].__setitem__("sha256", "ab" * 32)
        ),
        "population",
    ),
    "records-truncated": (
        b.edit_bytes(f"{C1}/records.parquet", lambda d: d[: len(d) // 2]),
        "not a readable Parquet",
    ),
    "records-empty": (
        b.edit_bytes(f"{C1}/records.parquet", lambda d: b""),
        "not a readable Parquet",
    ),
    "records-column-dropped": (
        b.edit_records(f"{C2}/records.parquet", _drop_column("ttft_ms")),
        "no column 'ttft_ms'",
    ),
    "records-column-string": (
        b.edit_records(f"{C2}/records.parquet", _string_column("ttft_ms")),
        "column 'ttft_ms' is string",
    ),
    "records-negative": (
        b.edit_records(f"{C1}/records.parquet", _negative_records),
        "non-negative",
    ),
    "records-ttft-x20": (
        b.edit_records(f"{C1}/records.parquet", b.scale_column("ttft_ms", 20)),
        "does not match",
    ),
    "validity-not-json": (
        b.edit_bytes(f"{C1}/validity.json", lambda d: b"{"),
        "validity.json is not JSON",
    ),
    "validity-wrong-type": (
        b.edit_json(f"{C1}/validity.json", _set("verdicts", [1, 2])),
        "validity.json",
    ),
    "trials-listing-escape": (_trials_listing({"trials": ["../../etc"]}), "trials.json"),
    "trials-listing-not-json": (
        lambda e: b.add(e, b.Entry(f"{C1}/trials.json", b"nope")),
        "trials.json",
    ),
    "reset-evidence-not-json": (
        b.edit_bytes(f"{C1}/reset-evidence.json", lambda d: b"{x"),
        "reset-evidence.json",
    ),
    "reset-evidence-huge-method": (
        b.edit_json(
            f"{C1}/reset-evidence.json", lambda d: d["target"].__setitem__("method", "X" * 100)
        ),
        "reset-evidence.json",
    ),
    "population-altered": (
        b.edit_bytes(
            "population/population.jsonl",
            lambda d: d.replace(b"inferlab-00000000", b"inferlab-99999999"),
        ),
        "population population/population.jsonl has sha256",
    ),
    "population-sha-file-altered": (
        b.edit_bytes("population/population.sha256", lambda d: b"00" * 32 + b"\n"),
        "population.sha256 says",
    ),
    # --- honest ones, or lies only reproduce may refuse: verified ---
    "honest": (lambda e: e, None),
    "foreign-page": (
        b.edit_bytes("report.html", lambda d: b"<script src='http://198.51.100.1/x.js'></script>"),
        None,
    ),
    "hostile-reset-consistent": (_hostile_reset, None),
}


def _get(entries: b.Entries, name: str) -> bytes:
    return next(e.data for e in entries if e.name == name)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> b.Entries:
    return b.read_entries(published_bundle(tmp_path_factory.getbasetemp()))


def test_the_matrix_has_the_classes_the_issue_asks_for() -> None:
    assert len(VARIANTS) >= 60


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_crafted_bundle_gets_one_line_or_verifies_and_touches_nothing(
    variant: str, template: b.Entries, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    craft, said = VARIANTS[variant]
    crafted = b.write_archive(tmp_path / "crafted.tar.gz", craft(list(template)))
    neighbour = tmp_path / "neighbour"
    neighbour.mkdir()
    (neighbour / "keep.txt").write_text("the user's own file\n")
    before = fingerprint(tmp_path)
    code = main(["bundle", "--verify", str(crafted)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert fingerprint(tmp_path) == before
    if said is None:
        assert code == 0, captured.err
        assert "verified" in captured.out
        return
    assert code == 1, captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("inferlab-bench: error: "), captured.err
    assert said in lines[0], lines[0]

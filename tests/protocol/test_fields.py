"""Field checks beyond the wire shapes: names, paths, bounds, digests, and on-disk kinds."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from inferlab_bench.errors import RequestError
from inferlab_bench.protocol import (
    SCHEMA_HINT,
    BenchClientRequest,
    BenchDatasetPreparationRequest,
    parse_request,
)
from tests.protocol import examples


def case(**changes: Any) -> dict[str, Any]:
    data = examples.case_request(examples.LOAD_SHAPES[0])
    return _apply(data, changes)


def prep(**changes: Any) -> dict[str, Any]:
    return _apply(examples.prep_request(), changes)


def _apply(data: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value
    return data


def rejected(model: type[BaseModel], data: dict[str, Any], *, check_paths: bool = False) -> str:
    with pytest.raises(RequestError) as info:
        parse_request(model, json.dumps(data), check_paths=check_paths)
    return str(info.value)


@pytest.mark.parametrize(
    ("data", "field", "says"),
    [
        # Finding 10: accepted with `succeeded` before.
        (prep(required_entries=0), "required_entries", "greater than or equal to 1"),
        (case(definition__request_slo__ttft_ms=-1.0), "request_slo.ttft_ms", "greater than 0"),
        (
            case(definition__request_slo__minimum_good_request_ratio=-1.0),
            "minimum_good_request_ratio",
            "greater than 0",
        ),
        (
            case(definition__request_slo__minimum_good_request_ratio=0.0),
            "minimum_good_request_ratio",
            "greater than 0",
        ),
        (
            case(definition__request_slo__minimum_good_request_ratio=1.5),
            "minimum_good_request_ratio",
            "less than or equal to 1",
        ),
        # Finding 11: errors that name their source.
        (prep(source_path=""), "source_path", "must not be empty"),
        (prep(source_path="/data/x\x00.json"), "source_path", "NUL byte"),
        (case(endpoint__host=""), "endpoint.host", "must not be empty"),
        (case(endpoint__host="a\x00b"), "endpoint.host", "NUL byte"),
        (case(model__locator=""), "model.locator", "must not be empty"),
        (case(model__served_name=""), "model.served_name", "must not be empty"),
        # Finding 8: a NUL byte was an internal ValueError.
        (case(artifact_dir="/tmp/a\x00b"), "artifact_dir", "NUL byte"),
        (case(population__path="/tmp/p\x00.jsonl"), "population.path", "NUL byte"),
        # Finding 5: the digest is never a path.
        (
            prep(request_source__catalog__sha256="../../../../victim.txt"),
            "catalog.sha256",
            "64 lower-case hex digits",
        ),
        (case(population__sha256="AB" * 32), "population.sha256", "64 lower-case hex digits"),
        (case(artifact_dir="/runs/../etc"), "artifact_dir", "'..'"),
        (case(endpoint__port=0), "endpoint.port", "greater than or equal to 1"),
        (case(endpoint__chat_completions_path="v1/chat"), "chat_completions_path", "'/'"),
        (case(endpoint__completions_path="v1"), "endpoint.completions_path", "'/'"),
        (case(case__request_count=0), "case.request_count", "greater than or equal to 1"),
        (case(case_budget_seconds=0.0), "case_budget_seconds", "greater than 0"),
    ],
)
def test_pure_field_checks_name_the_field(data: dict[str, Any], field: str, says: str) -> None:
    model = BenchClientRequest if "endpoint" in data else BenchDatasetPreparationRequest
    message = rejected(model, data)
    assert field in message and says in message, message
    assert "internal error" not in message


def test_schema_hint_points_at_the_shipped_schema() -> None:
    """Finding 11: the hint named ``shared/spec/...``, a path users do not have."""
    message = rejected(BenchClientRequest, case(endpoint__host=""))
    assert "shared/spec" not in message and SCHEMA_HINT in message
    import inferlab_bench

    shipped = Path(inferlab_bench.__file__).parent / "schema" / "protocol-v6.schema.json"
    assert "inferlab_bench/schema/protocol-v6.schema.json" in SCHEMA_HINT and shipped.is_file()


def test_valid_edges_are_still_accepted() -> None:
    ok = case(definition__request_slo__minimum_good_request_ratio=1.0, case__warmup_request_count=0)
    parse_request(BenchClientRequest, json.dumps(ok))
    # Never used by this client: a control plane may leave it empty, or report odd cache paths.
    unused = case(endpoint__completions_path="")
    unused["definition"]["request_source"]["catalog"]["cache_path"] = "/c/../inferlab/x"
    parse_request(BenchClientRequest, json.dumps(unused))
    parse_request(BenchDatasetPreparationRequest, json.dumps(prep(seed=0, required_entries=1)))


# --- On-disk checks (JSON mode passes check_paths=True). ---


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    regular = tmp_path / "file.txt"
    regular.write_text("x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link-to-dir"
    link.symlink_to(tmp_path)
    return {
        "dir": tmp_path,
        "file": regular,
        "fifo": fifo,
        "link-to-dir": link,
        "missing": tmp_path / "missing" / "deeper",
        "under-file": regular / "child",
        "dev-null": Path("/dev/null"),
        "proc": Path("/proc/inferlab-test"),
    }


@pytest.mark.parametrize(
    ("place", "ok", "says"),
    [
        ("dir", True, ""),
        ("link-to-dir", True, ""),
        ("missing", True, ""),
        ("file", False, "is a regular file, expected a directory"),
        ("under-file", False, "is a regular file, expected a directory"),
        ("fifo", False, "is a FIFO, expected a directory"),
        ("dev-null", False, "is a character device, expected a directory"),
        ("proc", False, "cannot create it in /proc"),
    ],
)
@pytest.mark.parametrize("model", ["case", "prepare"])
def test_artifact_dir_must_be_a_directory_we_can_write(
    places: dict[str, Path], place: str, ok: bool, says: str, model: str
) -> None:
    """Finding 8: these were ``internal error: NotADirectoryError/PermissionError``."""
    path = str(places[place])
    data, kind = (
        (case(artifact_dir=path), BenchClientRequest)
        if model == "case"
        else (prep(artifact_dir=path), BenchDatasetPreparationRequest)
    )
    if model == "case":
        data["population"]["path"] = str(places["file"])
    else:
        data["source_path"] = str(places["file"])
    if ok:
        parse_request(kind, json.dumps(data), check_paths=True)
        assert not places["missing"].exists()  # checking creates nothing
        return
    message = rejected(kind, data, check_paths=True)
    assert f"artifact_dir: {path}" in message and says in message, message


@pytest.mark.parametrize(
    ("place", "ok", "says"),
    [
        ("file", True, ""),
        ("fifo", False, "is a FIFO, expected a regular file"),
        ("dir", False, "is a directory, expected a regular file"),
        ("dev-null", False, "is a character device"),
        ("missing", False, "no such file or directory"),
    ],
)
def test_population_path_must_be_a_regular_file(
    places: dict[str, Path], place: str, ok: bool, says: str
) -> None:
    """Finding 4/8: a FIFO hung the case; it is refused without being opened."""
    data = case(artifact_dir=str(places["dir"]), population__path=str(places[place]))
    if ok:
        parse_request(BenchClientRequest, json.dumps(data), check_paths=True)
        return
    message = rejected(BenchClientRequest, data, check_paths=True)
    assert "population.path" in message and says in message, message


@pytest.mark.parametrize(
    ("place", "ok"),
    [("file", True), ("missing", True), ("fifo", False), ("dir", False), ("dev-null", False)],
)
def test_source_path_may_be_absent_but_never_a_special_file(
    places: dict[str, Path], place: str, ok: bool
) -> None:
    data = prep(artifact_dir=str(places["dir"]), source_path=str(places[place]))
    if ok:
        parse_request(BenchDatasetPreparationRequest, json.dumps(data), check_paths=True)
        return
    message = rejected(BenchDatasetPreparationRequest, data, check_paths=True)
    assert "source_path" in message and "expected a regular file" in message


def test_saved_requests_are_read_back_without_disk_checks() -> None:
    data = case(population__path="/gone/population.jsonl", artifact_dir="/gone/c1")
    parse_request(BenchClientRequest, json.dumps(data))

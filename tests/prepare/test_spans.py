"""Record spans: the lazily parsed source equals a whole-file parse, and damage is reported."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from inferlab_bench.errors import DatasetError
from inferlab_bench.prepare import spans
from inferlab_bench.prepare.sharegpt import read_records
from inferlab_bench.prepare.stage import run_prepare
from tests.prepare.conftest import convo, prep_request, write_catalog

# Characters that matter to the scan: quotes, backslash runs, brackets and commas in text.
HOSTILE = ['"', "\\", "\\\\", ",", "[", "]", "{", "}", "a", " ", "é", "\n", "😀", '\\"']


def hostile_records(rng: random.Random, count: int) -> list[Any]:
    def text() -> str:
        return "".join(rng.choices(HOSTILE, k=rng.randrange(0, 40)))

    return [
        {"id": text(), "conversations": [{"from": "human", "value": text()}] * rng.randrange(3)}
        for _ in range(count)
    ]


@pytest.mark.parametrize("window", [1, 7, 64, 1 << 20])
def test_spans_give_back_every_record_across_window_edges(
    window: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(spans, "_WINDOW", window)
    rng = random.Random(window)
    for trial in range(60):
        records = hostile_records(rng, rng.randrange(0, 6))
        for option in (None, orjson.OPT_INDENT_2):
            path = tmp_path / f"{trial}.json"
            path.write_bytes(orjson.dumps(records, option=option))
            assert list(read_records(path).records) == records
        lines = tmp_path / f"{trial}.jsonl"
        lines.write_bytes(b"".join(orjson.dumps(r) + b"\n\n" for r in records))
        source = read_records(lines)
        assert source.source_format == "jsonl" and list(source.records) == records


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'[{"id": "a"}, {"id": "b"', "not closed (the file is truncated)"),
        (b'[{"id": "a}]', "not closed (the file is truncated)"),
        (b'[{"id": "a"}] [', "more than one top-level JSON value"),
        (b'[{"id": "a"}] x', "unexpected bytes after the JSON array"),
        (b'[{"id": "a"}]]', "unbalanced brackets"),
    ],
)
def test_structural_damage_is_a_clear_error(data: bytes, message: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    with pytest.raises(DatasetError, match="not valid JSON") as raised:
        read_records(path)
    assert message in str(raised.value)


def test_the_array_scan_refuses_other_values() -> None:
    with pytest.raises(spans.SpanError, match="expected a JSON array of conversations"):
        spans.array_spans(b'{"id": 1}')


def test_an_empty_array_has_no_records(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_bytes(b" [\n ] \n")
    assert len(read_records(path).records) == 0


def write_raw(tmp_path: Path, data: bytes) -> tuple[Path, Path]:
    path = tmp_path / "data" / "sharegpt.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    catalog = tmp_path / "catalog"
    write_catalog(catalog, hashlib.sha256(data).hexdigest(), "http://127.0.0.1:9/none")
    return path, catalog


def test_a_record_that_does_not_parse_fails_the_preparation_by_its_position(
    tmp_path: Path,
) -> None:
    good = [json.dumps(convo("q", "a long enough answer", id=f"c{i}")) for i in range(3000)]
    good[2500] = '{"id": "broken", "conversations": tru}'  # balanced, but not JSON
    source, catalog = write_raw(tmp_path, ("[" + ",".join(good) + "]").encode())
    result = run_prepare(prep_request(source, catalog, tmp_path / "o"), catalog_dir=catalog)
    assert result.status.value == "failed"
    assert result.error is not None and "record 2500 (byte " in result.error
    assert "is not valid JSON" in result.error
    assert not (tmp_path / "o" / "population.jsonl").exists()


def test_a_truncated_file_fails_before_tokenizing(tmp_path: Path) -> None:
    data = json.dumps([convo("q", "a long enough answer")] * 5).encode()[:-20]
    source, catalog = write_raw(tmp_path, data)
    result = run_prepare(prep_request(source, catalog, tmp_path / "o"), catalog_dir=catalog)
    assert result.status.value == "failed"
    assert result.error is not None and "truncated" in result.error


def test_a_speaker_that_is_not_a_string_is_an_invalid_conversation(tmp_path: Path) -> None:
    odd = {"id": "odd", "conversations": [{"from": ["human"], "value": "q"}]}
    records = [odd, convo("q", "a long enough answer"), convo("r", "another fine answer")]
    source, catalog = write_raw(tmp_path, json.dumps(records).encode())
    result = run_prepare(prep_request(source, catalog, tmp_path / "o"), catalog_dir=catalog)
    assert result.status.value == "succeeded", result.error
    assert result.ineligible_reasons == {"invalid_conversation": 1}

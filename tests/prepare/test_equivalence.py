"""The fast path equals the straightforward reference; determinism; the token-table cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from inferlab_bench.prepare.stage import run_prepare
from inferlab_bench.prepare.write import Entry, population_bytes
from tests.prepare.conftest import QWEN_DIR, prep_request
from tests.prepare.reference import reference_select

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """1,500 ShareGPT-like conversations from the project's generator (incl. huge messages)."""
    path = tmp_path_factory.mktemp("gen") / "gen.json"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "make_sharegpt_like.py"),
            str(path),
            "--conversations",
            "1500",
            "--seed",
            "7",
        ],
        check=True,
        capture_output=True,
    )
    records: list[Any] = json.loads(path.read_text())
    # Make sure the pathological shapes are there: a huge first message, and a huge late one.
    records.append(
        {
            "id": "huge-first",
            "conversations": [
                {"from": "human", "value": "lorem " * 70_000},
                {"from": "gpt", "value": "short answer here"},
            ],
        }
    )
    records.append(
        {
            "id": "huge-late",
            "conversations": [
                {"from": "human", "value": "q one"},
                {"from": "gpt", "value": "a one two"},
                {"from": "human", "value": "ipsum " * 60_000},
                {"from": "gpt", "value": "a two three"},
            ],
        }
    )
    return records


@pytest.mark.parametrize(("max_input", "output_tokens"), [(256, None), (1024, 16)])
def test_fast_path_equals_reference(
    generated: list[Any], dataset: Any, tmp_path: Path, max_input: int, output_tokens: int | None
) -> None:
    source, catalog = dataset(generated)
    request = prep_request(
        source,
        catalog,
        tmp_path / "o",
        required=150,
        max_input=max_input,
        output_tokens=output_tokens,
        seed=11,
    )
    ours = run_prepare(request, catalog_dir=catalog)
    assert ours.status.value == "succeeded", ours.error
    tok = AutoTokenizer.from_pretrained(QWEN_DIR, local_files_only=True)
    ref = reference_select(
        generated,
        tok,
        seed=11,
        required=150,
        max_input_tokens=max_input,
        output_tokens=output_tokens,
    )
    assert ours.ineligible_reasons == ref["reasons"]
    assert ours.admitted_entries == ref["admitted"] and ours.candidate_entries == len(generated)
    entries = [
        Entry(i, sid, o["messages"], o["target"], 0, o["input_tokens"], 0, o["output_length"])
        for _, i, sid, o in ref["chosen"]
    ]
    assert Path(ours.population.path).read_bytes() == population_bytes(entries)  # type: ignore[union-attr]
    assert ours.ineligible_reasons.get("input_exceeds_maximum", 0) >= 2


def test_same_request_twice_is_byte_identical_and_reuses_the_table(
    generated: list[Any], dataset: Any, tmp_path: Path
) -> None:
    source, catalog = dataset(generated[:400])
    first = run_prepare(
        prep_request(source, catalog, tmp_path / "a", required=50), catalog_dir=catalog
    )
    second = run_prepare(
        prep_request(source, catalog, tmp_path / "b", required=50), catalog_dir=catalog
    )
    assert first.population is not None and second.population is not None
    assert Path(first.population.path).read_bytes() == Path(second.population.path).read_bytes()
    assert first.population.sha256 == second.population.sha256
    manifests = [json.loads((tmp_path / d / "preparation-manifest.json").read_text()) for d in "ab"]
    assert [m["token_table_cache_hit"] for m in manifests] == [False, True]
    assert manifests[0]["source_format_read"] == "json-array"
    assert manifests[1]["source_format_read"] == "cached-token-table"
    other = run_prepare(
        prep_request(source, catalog, tmp_path / "c", required=50, seed=1), catalog_dir=catalog
    )
    assert other.population is not None and other.population.sha256 != first.population.sha256
    assert other.admitted_entries == first.admitted_entries  # same census, other sample


def test_jsonl_source_gives_the_same_population(
    generated: list[Any], dataset: Any, tmp_path: Path
) -> None:
    array, catalog = dataset(generated[:300])
    by_array = run_prepare(
        prep_request(array, catalog, tmp_path / "a", required=30), catalog_dir=catalog
    )
    lines, catalog_l = dataset(generated[:300], name="sharegpt.jsonl", jsonl=True)
    by_lines = run_prepare(
        prep_request(lines, catalog_l, tmp_path / "l", required=30), catalog_dir=catalog_l
    )
    assert by_array.population is not None and by_lines.population is not None
    assert by_array.population.sha256 == by_lines.population.sha256
    manifest = json.loads((tmp_path / "l" / "preparation-manifest.json").read_text())
    assert manifest["source_format_read"] == "jsonl"

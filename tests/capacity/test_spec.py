"""The search's own input: load ranges, criteria, the JSON-mode request and its failed result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from inferlab_bench.capacity.spec import Axis, Criterion, SearchSpec
from inferlab_bench.cli import main
from tests.case.support import make_request

ATTAIN = Criterion(kind="attainment", value=0.95)


def test_a_rate_is_searched_in_hundredths() -> None:
    spec = SearchSpec(axis=Axis.RATE, low=0.5, high=64, criterion=ATTAIN)
    assert (spec.index_low, spec.index_high) == (50, 6400)
    assert spec.load(337) == 3.37
    assert spec.shape(337).request_rate == 3.37  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"axis": "concurrency", "low": 8, "high": 2}, "low must be below high"),
        ({"axis": "concurrency", "low": 1.5, "high": 4}, "whole numbers"),
        ({"axis": "rate", "low": 0.001, "high": 4}, "0.01"),
        ({"axis": "concurrency", "low": 1, "high": 4, "burstiness": 0.5}, "burstiness"),
    ],
)
def test_a_bad_range_is_refused_in_words(fields: dict[str, object], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        SearchSpec.model_validate({**fields, "criterion": ATTAIN})


def test_only_percentiles_aiperf_can_filter_on() -> None:
    assert Criterion(kind="percentile", value=99).ratio == 0.99
    with pytest.raises(ValidationError, match="p50, p75, p90, p95, p99"):
        Criterion(kind="percentile", value=97)
    with pytest.raises(ValidationError, match="fraction"):
        Criterion(kind="attainment", value=95)


def test_json_mode_writes_a_failed_result_naming_the_field(tmp_path: Path) -> None:
    case = make_request(port=9, artifact_dir=tmp_path / "search", request_count=8)
    request = {
        "schema_name": "inferlab-capacity-request-v1",
        "schema_version": 1,
        "case": json.loads(case.model_dump_json()),
        "search": {
            "axis": "concurrency",
            "low": 1,
            "high": 4,
            "criterion": {"kind": "attainment", "value": 0.9},
        },
    }
    (tmp_path / "request.json").write_text(json.dumps(request))
    code = main(
        [
            "capacity-json",
            "--input",
            str(tmp_path / "request.json"),
            "--output",
            str(tmp_path / "out.json"),
        ]
    )
    result = json.loads((tmp_path / "out.json").read_text())
    assert code == 0 and result["status"] == "failed"
    assert "request_slo" in result["error"] and result["schema_name"] == "inferlab-capacity-v1"
    assert not (tmp_path / "search").exists()

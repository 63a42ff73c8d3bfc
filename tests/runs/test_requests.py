"""Options -> protocol requests: load shapes, SLOs, endpoints, population facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferlab_bench.errors import ConfigurationError, PopulationError
from inferlab_bench.load import Load
from inferlab_bench.protocol import RandomSource, dump_json
from inferlab_bench.runs.population import population_facts
from inferlab_bench.runs.requests import (
    CaseShape,
    Target,
    Workload,
    case_request,
    endpoint_input,
    slo_input,
)
from tests.conftest import SchemaCheck


def test_slo_is_absent_without_bounds() -> None:
    assert slo_input(None, None, None, 0.9) is None
    slo = slo_input(100.0, None, 900.0, 0.95)
    assert slo is not None and slo.ttft_ms == 100.0 and slo.minimum_good_request_ratio == 0.95


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        ("http://127.0.0.1:8000", "127.0.0.1", 8000),
        ("localhost:9", "localhost", 9),
        ("http://h", "h", 80),
    ],
)
def test_endpoint_from_url(url: str, host: str, port: int) -> None:
    endpoint = endpoint_input(Target(url, "m", "/tok"))
    assert (endpoint.host, endpoint.port) == (host, port)


@pytest.mark.parametrize("url", ["https://h:1", "http://:80", "http://h:99999"])
def test_bad_urls_are_rejected(url: str) -> None:
    with pytest.raises(ConfigurationError, match="--url"):
        endpoint_input(Target(url, "m", "/tok"))


def test_case_request_is_schema_valid(tmp_path: Path, check_v6: SchemaCheck) -> None:
    workload = Workload(
        source=RandomSource(kind="random", input_tokens=64, output_tokens=8),
        population=None,
        seed=3,
        slo=slo_input(50.0, 5.0, None, 0.9),
        reset_prefix_cache=True,
    )
    request = case_request(
        Target("http://127.0.0.1:8000", "sim", "/tok"),
        workload,
        CaseShape(Load.at_rate(3.0).wire(), requests=16, warmup=0, budget_seconds=120.0),
        tmp_path,
    )
    check_v6("BenchClientRequest", json.loads(dump_json(request)))
    assert request.definition.timeout_seconds == 120
    assert request.case.request_count == 16


def test_population_facts(tmp_path: Path) -> None:
    path = tmp_path / "population.jsonl"
    path.write_text('{"output_length":5}\n{"output_length":2}\n')
    facts = population_facts(path)
    assert facts.entries == 2 and facts.tpot_applicable is True and len(facts.sha256) == 64
    path.write_text('{"output_length":5}\n{"output_length":1}\n')
    assert population_facts(path).tpot_applicable is False


def test_population_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "population.jsonl"
    path.write_text('{"output_length":5}\nnot json\n')
    with pytest.raises(PopulationError, match="population.jsonl:2"):
        population_facts(path)
    with pytest.raises(PopulationError, match="cannot read"):
        population_facts(tmp_path / "missing.jsonl")
    path.write_text("")
    with pytest.raises(PopulationError, match="no entries"):
        population_facts(path)

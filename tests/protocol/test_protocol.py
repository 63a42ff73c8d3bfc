"""The v6 wire models: round-trips, strictness, and conformance with the spec's schema."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import BaseModel

from inferlab_bench.errors import RequestError
from inferlab_bench.protocol import (
    BenchClientRequest,
    BenchClientResult,
    BenchDatasetPreparationRequest,
    BenchDatasetPreparationResult,
    ClientStatus,
    dump_json,
    parse_request,
)
from tests.conftest import SchemaCheck
from tests.protocol import examples

EXAMPLES: list[tuple[str, type[BaseModel], dict[str, Any]]] = [
    ("BenchDatasetPreparationRequest", BenchDatasetPreparationRequest, examples.prep_request()),
    (
        "BenchDatasetPreparationRequest",
        BenchDatasetPreparationRequest,
        examples.prep_request(examples.RANDOM_SOURCE),
    ),
    (
        "BenchDatasetPreparationResult",
        BenchDatasetPreparationResult,
        examples.prep_result_succeeded(),
    ),
    ("BenchClientResult", BenchClientResult, examples.case_result_succeeded()),
    *[
        ("BenchClientRequest", BenchClientRequest, examples.case_request(shape))
        for shape in examples.LOAD_SHAPES
    ],
    (
        "BenchClientRequest",
        BenchClientRequest,
        examples.case_request(examples.LOAD_SHAPES[0], examples.RANDOM_SOURCE),
    ),
]


@pytest.mark.parametrize(("name", "model", "example"), EXAMPLES)
def test_round_trip_is_lossless(name: str, model: type[BaseModel], example: dict[str, Any]) -> None:
    parsed = parse_request(model, json.dumps(example))
    again = json.loads(dump_json(parsed))
    assert again == example
    assert parse_request(model, json.dumps(again)) == parsed


@pytest.mark.parametrize(("name", "model", "example"), EXAMPLES)
def test_examples_conform_to_spec_schema(
    name: str, model: type[BaseModel], example: dict[str, Any], check_v6: SchemaCheck
) -> None:
    check_v6(name, example)
    check_v6(name, json.loads(dump_json(parse_request(model, json.dumps(example)))))


def test_optional_fields_may_be_omitted() -> None:
    request = examples.case_request({"kind": "request_rate_limited", "request_rate": 1.0})
    del request["population"]
    del request["definition"]["request_slo"]
    del request["definition"]["request_body"]
    del request["definition"]["reset_prefix_cache"]
    del request["case"]["warmup_request_count"]
    parsed = parse_request(BenchClientRequest, json.dumps(request))
    assert parsed.population is None
    assert parsed.definition.request_body == {}
    assert parsed.definition.reset_prefix_cache is False
    assert parsed.case.warmup_request_count == 0


def _rejects(model: type[BaseModel], data: dict[str, Any], *fragments: str) -> str:
    with pytest.raises(RequestError) as info:
        parse_request(model, json.dumps(data))
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_unknown_field_is_rejected_with_its_path() -> None:
    request = examples.case_request(examples.LOAD_SHAPES[0])
    request["definition"]["colour"] = "blue"
    _rejects(BenchClientRequest, request, "definition.colour", "unknown field")


def test_unknown_field_in_nested_catalog_is_rejected() -> None:
    request = examples.prep_request()
    request["request_source"]["catalog"]["mirror"] = "x"
    _rejects(BenchDatasetPreparationRequest, request, "request_source.dataset.catalog.mirror")


@pytest.mark.parametrize("version", ["5", 6, "6.0", None])
def test_protocol_version_must_be_the_string_6(version: object) -> None:
    request = examples.prep_request()
    request["protocol_version"] = version
    _rejects(BenchDatasetPreparationRequest, request, "protocol_version", "'6'")


def test_wrong_load_shape_tag_is_rejected() -> None:
    request = examples.case_request({"kind": "closed_loop", "concurrency": 3})
    _rejects(BenchClientRequest, request, "case.load_shape", "closed_loop")


def test_wrong_source_tag_and_dataset_enum_are_rejected() -> None:
    source = copy.deepcopy(examples.DATASET_SOURCE)
    source["dataset"] = "lmsys"
    _rejects(
        BenchDatasetPreparationRequest,
        examples.prep_request(source),
        "request_source.dataset.dataset",
    )
    _rejects(
        BenchDatasetPreparationRequest,
        examples.prep_request({"kind": "synthetic", "input_tokens": 1, "output_tokens": 1}),
        "request_source",
    )


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("required_entries",), -1),
        (("seed",), -5),
        (("request_source", "max_input_tokens"), -1),
        (("required_entries",), 2**32),
    ],
)
def test_negative_or_oversized_unsigned_values_are_rejected(
    path: tuple[str, ...], value: int
) -> None:
    request = examples.prep_request()
    target = request
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    _rejects(BenchDatasetPreparationRequest, request, path[-1])


def test_port_out_of_range_and_negative_concurrency_are_rejected() -> None:
    request = examples.case_request({"kind": "concurrency_limited", "concurrency": -2})
    request["endpoint"]["port"] = 70000
    message = _rejects(BenchClientRequest, request, "endpoint.port", "case.load_shape")
    assert "concurrency" in message


def test_strings_are_not_coerced_into_numbers() -> None:
    request = examples.prep_request()
    request["required_entries"] = "64"
    _rejects(BenchDatasetPreparationRequest, request, "required_entries", "valid integer")


def test_request_body_accepts_nested_setting_values_but_not_null() -> None:
    request = examples.prep_request()
    request["request_body"] = {"a": {"b": [1, 2.5, "x", False, {"c": []}]}}
    parsed = parse_request(BenchDatasetPreparationRequest, json.dumps(request))
    assert parsed.request_body["a"] == {"b": [1, 2.5, "x", False, {"c": []}]}
    request["request_body"] = {"a": None}
    _rejects(BenchDatasetPreparationRequest, request, "request_body.a")


def test_non_json_is_rejected_clearly() -> None:
    with pytest.raises(RequestError, match="not valid JSON"):
        parse_request(BenchClientRequest, b"{not json")


def test_failed_result_defaults_conform(check_v6: SchemaCheck) -> None:
    result = BenchClientResult(status=ClientStatus.FAILED, error="boom")
    check_v6("BenchClientResult", json.loads(dump_json(result)))
    prep = BenchDatasetPreparationResult(
        status=ClientStatus.FAILED, materialization_identity="", requested_entries=0, error="boom"
    )
    check_v6("BenchDatasetPreparationResult", json.loads(dump_json(prep)))


def test_endpoint_url_is_built_from_host_port_and_path() -> None:
    parsed = parse_request(
        BenchClientRequest, json.dumps(examples.case_request(examples.LOAD_SHAPES[0]))
    )
    assert parsed.endpoint.chat_completions_url == "http://127.0.0.1:8000/v1/chat/completions"

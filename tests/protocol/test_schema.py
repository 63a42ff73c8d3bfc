"""The committed schema is what protocol.py gives, and agrees with the spec's schema."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inferlab_bench import schema
from tests.conftest import spec_schema

MESSAGES = [model.__name__ for model, _ in schema.MESSAGES]
RESULTS = {model.__name__ for model, mode in schema.MESSAGES if mode == "serialization"}


def test_committed_schema_is_what_the_models_generate() -> None:
    assert schema.SCHEMA_PATH.read_bytes() == schema.render(), (
        "stale schema: run python3 scripts/generate_schema.py"
    )


def test_committed_schema_is_shipped_in_the_package() -> None:
    assert schema.SCHEMA_PATH.parent.name == "schema"
    assert set(MESSAGES) <= set(schema.load()["$defs"])


class Shape:
    """A schema node reduced to what both schemas must agree on."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.defs: dict[str, Any] = document["$defs"]

    def of(self, node: dict[str, Any], seen: frozenset[str] = frozenset()) -> Any:
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name in seen:
                return ("recursive", name)
            return self.of(self.defs[name], seen | {name})
        if "const" in node:
            return ("enum", frozenset([node["const"]]))
        if "enum" in node:
            return ("enum", frozenset(node["enum"]))
        variants = node.get("oneOf") or node.get("anyOf")
        if variants is not None:
            return self._union([self.of(v, seen) for v in variants])
        kinds = node.get("type")
        if isinstance(kinds, list):
            return self._union([self.of({**node, "type": k}, seen) for k in kinds])
        if kinds == "object":
            return self._object(node, seen)
        if kinds == "array":
            return ("array", self.of(node.get("items", {}), seen))
        return ("type", kinds)

    def _object(self, node: dict[str, Any], seen: frozenset[str]) -> Any:
        properties = node.get("properties", {})
        extra = node.get("additionalProperties", True)
        return (
            "object",
            tuple(sorted((k, self.of(v, seen)) for k, v in properties.items())),
            frozenset(node.get("required", ())),
            extra if isinstance(extra, bool) else self.of(extra, seen),
        )

    @staticmethod
    def _union(shapes: list[Any]) -> Any:
        # enums split into one-value variants (serde's oneOf of consts) are one enum
        if shapes and all(s[0] == "enum" for s in shapes):
            return ("enum", frozenset().union(*(s[1] for s in shapes)))
        if len(shapes) == 1:
            return shapes[0]
        return ("union", tuple(sorted(shapes, key=repr)))


def differences(ours: Any, spec: Any, where: str, result: bool) -> list[str]:
    """Where two shapes disagree; a result may require more than the spec (we write all)."""
    if ours[0] != spec[0]:
        return [f"{where}: ours {ours[0]}, spec {spec[0]}"]
    if ours[0] == "object":
        found = []
        mine, theirs = dict(ours[1]), dict(spec[1])
        if set(mine) != set(theirs):
            found.append(f"{where}: properties differ {sorted(set(mine) ^ set(theirs))}")
        required_ok = ours[2] >= spec[2] if result else ours[2] == spec[2]
        if not required_ok:
            found.append(f"{where}: required ours {sorted(ours[2])}, spec {sorted(spec[2])}")
        if ours[3] != spec[3] and not (isinstance(ours[3], tuple) and isinstance(spec[3], tuple)):
            found.append(f"{where}: additionalProperties ours {ours[3]}, spec {spec[3]}")
        elif isinstance(ours[3], tuple):
            found += differences(ours[3], spec[3], f"{where}.*", result)
        for key in sorted(set(mine) & set(theirs)):
            found += differences(mine[key], theirs[key], f"{where}.{key}", result)
        return found
    if ours[0] == "union":
        if len(ours[1]) != len(spec[1]):
            return [f"{where}: {len(ours[1])} variants, spec {len(spec[1])}"]
        return [
            d
            for i, (a, b) in enumerate(zip(ours[1], spec[1], strict=True))
            for d in differences(a, b, f"{where}|{i}", result)
        ]
    if ours[0] == "array":
        return differences(ours[1], spec[1], f"{where}[]", result)
    return [] if ours == spec else [f"{where}: ours {ours[1:]}, spec {spec[1:]}"]


def test_shape_comparison_sees_a_difference() -> None:
    document = schema.load()
    changed = {**document, "$defs": {**document["$defs"]}}
    request = dict(changed["$defs"]["BenchCaseInput"])
    request["required"] = [*request["required"], "warmup_request_count"]
    changed["$defs"]["BenchCaseInput"] = request
    a = Shape(document).of({"$ref": "#/$defs/BenchClientRequest"})
    b = Shape(changed).of({"$ref": "#/$defs/BenchClientRequest"})
    assert differences(a, b, "BenchClientRequest", result=False) == [
        "BenchClientRequest.case: required ours ['load_shape', 'request_count'], "
        "spec ['load_shape', 'request_count', 'warmup_request_count']"
    ]


def test_our_schema_agrees_with_the_spec() -> None:
    """Same fields, required fields, types and enum values for each message, all the way
    down (numeric bounds may be stricter: the spec only says unsigned). One test, so a clone
    without ``../shared`` has one skip, not one per message."""
    spec = spec_schema()
    if spec is None:
        pytest.skip("the spec's schema (../shared/spec) is not beside this checkout")
    found = []
    for message in MESSAGES:
        ours = Shape(schema.load()).of({"$ref": f"#/$defs/{message}"})
        theirs = Shape(spec).of({"$ref": f"#/$defs/{message}"})
        found += differences(ours, theirs, message, result=message in RESULTS)
    assert found == []


def test_committed_validity_schema_is_what_the_models_generate() -> None:
    assert schema.VALIDITY_SCHEMA_PATH.read_bytes() == schema.render_validity(), (
        "stale validity schema: run python3 scripts/generate_schema.py"
    )
    sections = set(json.loads(schema.VALIDITY_SCHEMA_PATH.read_bytes())["properties"])
    assert {"certification", "scheduled_latency", "steady_state", "explanations"} <= sections

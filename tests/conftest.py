"""Shared test fixtures: the protocol v6 JSON schema committed with the package."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inferlab_bench import schema

SchemaCheck = Callable[[str, Any], None]
# The spec's own schema, beside the project in a full workspace; absent in a plain clone.
SPEC_SCHEMA = (
    Path(__file__).resolve().parent.parent.parent / "shared/spec/adapter-protocol-v6.schema.json"
)


def spec_schema() -> dict[str, Any] | None:
    if not SPEC_SCHEMA.is_file():
        return None
    loaded: dict[str, Any] = json.loads(SPEC_SCHEMA.read_bytes())
    return loaded


@pytest.fixture(scope="session")
def v6_schema() -> dict[str, Any]:
    """Our schema, generated from protocol.py (tests/protocol/test_schema.py keeps it in step
    with the models, and with the spec's schema when ``../shared/spec`` is present)."""
    return schema.load()


@pytest.fixture(scope="session")
def check_v6(v6_schema: dict[str, Any]) -> SchemaCheck:
    """``check_v6("BenchClientResult", obj)`` validates obj against that ``$defs`` entry
    of our schema, and of the spec's too when it is present."""
    import jsonschema

    documents = [v6_schema] + [s for s in (spec_schema(),) if s is not None]

    def check(definition: str, instance: Any) -> None:
        for document in documents:
            sub = {"$ref": f"#/$defs/{definition}", "$defs": document["$defs"]}
            jsonschema.Draft202012Validator(sub).validate(instance)

    return check

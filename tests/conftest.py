"""Shared test fixtures: the v6 JSON schema from ../shared (skipped cleanly when absent)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SPEC_SCHEMA = REPO_ROOT.parent / "shared" / "spec" / "adapter-protocol-v6.schema.json"

SchemaCheck = Callable[[str, Any], None]


def _load_schema() -> dict[str, Any] | None:
    if not SPEC_SCHEMA.is_file():
        return None
    loaded: dict[str, Any] = json.loads(SPEC_SCHEMA.read_text())
    return loaded


@pytest.fixture(scope="session")
def v6_schema() -> dict[str, Any]:
    schema = _load_schema()
    if schema is None:
        pytest.skip(f"protocol schema not available at {SPEC_SCHEMA}")
    return schema


@pytest.fixture(scope="session")
def check_v6(v6_schema: dict[str, Any]) -> SchemaCheck:
    """``check_v6("BenchClientResult", obj)`` validates obj against that ``$defs`` entry."""
    import jsonschema

    def check(definition: str, instance: Any) -> None:
        sub = {"$ref": f"#/$defs/{definition}", "$defs": v6_schema["$defs"]}
        jsonschema.Draft202012Validator(sub).validate(instance)

    return check

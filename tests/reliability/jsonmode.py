"""Run a stage's JSON mode in-process, as the control plane would, and collect what it left."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from inferlab_bench.cli import case as case_cli
from inferlab_bench.cli import prepare as prepare_cli
from inferlab_bench.cli.jsonmode import run_json_command
from inferlab_bench.protocol import (
    BenchClientRequest,
    BenchDatasetPreparationRequest,
    ClientStatus,
)

STUB_ERROR = "stub stage: the request was accepted"


@dataclass(frozen=True)
class Stage:
    """One JSON-mode stage: its request model, result schema name and failed-result builder."""

    name: str
    request_model: type[BaseModel]
    result_definition: str
    failed_result: Callable[[str, bytes], BaseModel]


STAGES = {
    "case": Stage("case", BenchClientRequest, "BenchClientResult", case_cli.failed_result),
    "prepare": Stage(
        "prepare",
        BenchDatasetPreparationRequest,
        "BenchDatasetPreparationResult",
        prepare_cli.failed_result,
    ),
}


@dataclass
class Outcome:
    exit_code: int
    result: dict[str, Any] | None
    accepted: list[BaseModel] = field(default_factory=list)
    """Requests that passed validation and reached the (stub) stage."""


def run_stubbed(stage: Stage, request_path: Path, output_path: Path) -> Outcome:
    """JSON mode with the real parsing, validation and result writing; the stage is a stub.

    A request that passes validation reaches the stub, which records it and fails, so no
    variant ever starts real work (downloads, AIPerf).
    """
    accepted: list[BaseModel] = []

    def stub(request: BaseModel) -> BaseModel:
        accepted.append(request)
        return stage.failed_result(STUB_ERROR, b"{}")

    code = run_json_command(
        input_path=request_path,
        output_path=output_path,
        request_model=stage.request_model,
        stage=stub,
        failed_result=stage.failed_result,
        what=stage.name,
    )
    result = json.loads(output_path.read_bytes()) if output_path.is_file() else None
    return Outcome(code, result, accepted)


def is_failed(result: dict[str, Any] | None) -> bool:
    return result is not None and result.get("status") == ClientStatus.FAILED.value

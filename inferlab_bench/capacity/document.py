"""``capacity.json`` (schema ``inferlab-capacity-v1``): the answer and every probe's folder."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.capacity.answer import Answer, PlannerFacts, Probe
from inferlab_bench.capacity.spec import CAPACITY_SCHEMA, CAPACITY_SCHEMA_VERSION, SearchSpec

CAPACITY_FILE = "capacity.json"


def document(
    spec: SearchSpec,
    answer: Answer,
    probes: Sequence[Probe],
    planner: PlannerFacts,
    *,
    root: Path,
    wall_seconds: float,
    status: str = "succeeded",
    error: str | None = None,
) -> dict[str, Any]:
    return {
        "schema_name": CAPACITY_SCHEMA,
        "schema_version": CAPACITY_SCHEMA_VERSION,
        "status": status,
        "error": error,
        "search": spec.model_dump(mode="json"),
        "answer": answer_json(answer, spec),
        "planner": {
            "name": planner.name,
            "convergence_reason": planner.convergence_reason,
            "boundary_summary": planner.boundary,
        },
        "probes": [probe_json(p, root) for p in probes],
        "probes_run": len(probes),
        "probes_counted": sum(1 for p in probes if p.counted),
        "wall_seconds": round(wall_seconds, 3),
    }


def failed_document(error: str) -> dict[str, Any]:
    """A JSON-mode result for a search that could not start."""
    return {
        "schema_name": CAPACITY_SCHEMA,
        "schema_version": CAPACITY_SCHEMA_VERSION,
        "status": "failed",
        "error": error,
    }


def answer_json(answer: Answer, spec: SearchSpec) -> dict[str, Any]:
    data = dataclasses.asdict(answer)
    data["status"] = answer.status.value
    data["interval"] = None if answer.interval is None else list(answer.interval)
    data["unit"] = "concurrency" if spec.axis.value == "concurrency" else "requests/s"
    data["criterion"] = spec.criterion.label
    return data


def probe_json(probe: Probe, root: Path) -> dict[str, Any]:
    j = probe.judgement
    return {
        "number": probe.number,
        "load": probe.load,
        "label": probe.label,
        "directory": str(_relative(probe.directory, root)),
        "counted": probe.counted,
        "planner_iteration": probe.iteration,
        "valid": j.valid,
        "invalid_reason": j.invalid_reason,
        "validity": j.validity,
        "failed_verdicts": list(j.failed_verdicts),
        "client_limited": j.client_limited,
        "slo_met": j.slo_met,
        "attainment": j.attainment,
        "goodput": j.goodput,
        "request_throughput": j.request_throughput,
        "metrics": [dataclasses.asdict(m) for m in j.metrics],
    }


def write(path: Path, data: dict[str, Any]) -> Path:
    write_bytes_atomic(path, orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str) + b"\n")
    return path


def _relative(path: Path, root: Path) -> Path:
    try:
        return path.relative_to(root)
    except ValueError:
        return path

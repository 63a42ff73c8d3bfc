"""``inferlab-bench prepare``: materialize a frozen population (JSON mode)."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

import orjson

from inferlab_bench.cli.jsonmode import run_json_command
from inferlab_bench.cli.progress import stderr_progress
from inferlab_bench.prepare.catalog import CATALOG_DIR_ENV
from inferlab_bench.prepare.stage import run_prepare
from inferlab_bench.protocol import (
    BenchDatasetPreparationRequest,
    BenchDatasetPreparationResult,
    ClientStatus,
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("prepare", help="prepare a frozen dataset population")
    parser.add_argument(
        "--input", type=Path, required=True, help="BenchDatasetPreparationRequest JSON"
    )
    parser.add_argument("--output", type=Path, required=True, help="where to write the result JSON")
    parser.add_argument(
        "--catalog-dir",
        type=Path,
        default=None,
        help=f"use this catalog directory instead of the packaged one (env {CATALOG_DIR_ENV})",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return run_json_command(
        input_path=args.input,
        output_path=args.output,
        request_model=BenchDatasetPreparationRequest,
        stage=functools.partial(
            run_prepare, progress=stderr_progress(), catalog_dir=args.catalog_dir
        ),
        failed_result=failed_result,
    )


def failed_result(message: str, raw: bytes) -> BenchDatasetPreparationResult:
    """A failed result that echoes what could be read of an invalid request."""
    identity, requested = "", 0
    try:
        data = orjson.loads(raw)
        requested = int(data.get("required_entries", 0))
        source = data.get("request_source") or {}
        identity = str((source.get("catalog") or {}).get("materialization_identity", ""))
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        pass
    if not 0 <= requested < 2**32:
        requested = 0
    return BenchDatasetPreparationResult(
        status=ClientStatus.FAILED,
        materialization_identity=identity,
        requested_entries=requested,
        error=message,
    )

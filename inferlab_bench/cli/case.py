"""``inferlab-bench case``: run one load case with AIPerf (JSON mode)."""

from __future__ import annotations

import argparse
from pathlib import Path

from inferlab_bench.cli.jsonmode import run_json_command
from inferlab_bench.case.stage import run_case
from inferlab_bench.protocol import BenchClientRequest, BenchClientResult, ClientStatus


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("case", help="run one bench case (JSON request -> JSON result)")
    parser.add_argument("--input", type=Path, required=True, help="BenchClientRequest JSON")
    parser.add_argument("--output", type=Path, required=True, help="where to write the result JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return run_json_command(
        input_path=args.input,
        output_path=args.output,
        request_model=BenchClientRequest,
        stage=run_case,
        failed_result=failed_result,
    )


def failed_result(message: str, raw: bytes) -> BenchClientResult:
    return BenchClientResult(status=ClientStatus.FAILED, error=message)

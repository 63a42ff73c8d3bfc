"""``inferlab-bench case``: run one load case with AIPerf (JSON mode)."""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path

from inferlab_bench.case.reset import OPTION_HELP
from inferlab_bench.case.stage import CaseOptions, run_case
from inferlab_bench.cli.jsonmode import run_json_command
from inferlab_bench.protocol import BenchClientRequest, BenchClientResult, ClientStatus

RESET_ENV_VAR = "INFERLAB_PREFIX_CACHE_RESET"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("case", help="run one bench case (JSON request -> JSON result)")
    parser.add_argument("--input", type=Path, required=True, help="BenchClientRequest JSON")
    parser.add_argument("--output", type=Path, required=True, help="where to write the result JSON")
    parser.add_argument(
        "--prefix-cache-reset",
        metavar=OPTION_HELP,
        default=os.environ.get(RESET_ENV_VAR) or None,
        help=f"how to reset the server's prefix cache when the request asks for it "
        f"(env {RESET_ENV_VAR}; default: decided from GET /v1/models where reliable)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    options = CaseOptions(prefix_cache_reset=args.prefix_cache_reset)
    return run_json_command(
        input_path=args.input,
        output_path=args.output,
        request_model=BenchClientRequest,
        stage=functools.partial(run_case, options=options),
        failed_result=failed_result,
        what="case",
    )


def failed_result(message: str, raw: bytes) -> BenchClientResult:
    return BenchClientResult(status=ClientStatus.FAILED, error=message)

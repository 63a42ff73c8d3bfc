"""``inferlab-bench case``: run one load case with AIPerf (JSON mode)."""

from __future__ import annotations

import argparse
import dataclasses
import os

from inferlab_bench.case import connections
from inferlab_bench.case.conversation import SessionCaseRequest
from inferlab_bench.case.reset import OPTION_HELP
from inferlab_bench.case.stage import CaseOptions, run_case
from inferlab_bench.cli.flags import bind, with_flags
from inferlab_bench.cli.jsonmode import run_json_command
from inferlab_bench.cli.options import CaseCommandFlags
from inferlab_bench.protocol import BenchClientResult, ClientStatus

RESET_ENV_VAR = "INFERLAB_PREFIX_CACHE_RESET"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "case",
        help="run one bench case (JSON request -> JSON result)",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--input",
        required=True,
        help="BenchClientRequest JSON (v6, plus our optional inferlab_sessions)",
    )
    parser.add_argument("--output", required=True, help="where to write the result JSON")
    parser.add_argument(
        "--prefix-cache-reset",
        metavar=OPTION_HELP,
        default=os.environ.get(RESET_ENV_VAR) or None,
        help=f"how to reset the server's prefix cache when the request asks for it "
        f"(env {RESET_ENV_VAR}; default: decided from GET /v1/models where reliable)",
    )
    add_connections_flag(parser)
    bind(parser, run)


def add_connections_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--connections auto|pooled|close`` (env INFERLAB_CONNECTIONS), for case, run and sweep."""
    parser.add_argument(
        "--connections",
        metavar=connections.OPTION_HELP,
        default=os.environ.get(connections.ENV_VAR) or None,
        help="AIPerf's HTTP connections: a keep-alive pool, or one connection per request "
        "(close; for servers that drop pooled connections, e.g. llama.cpp). Default auto: "
        f"decided from GET /v1/models (env {connections.ENV_VAR})",
    )


def run(args: argparse.Namespace) -> int:
    return with_flags(args, CaseCommandFlags, _run)


def _run(flags: CaseCommandFlags) -> int:
    options = CaseOptions(
        prefix_cache_reset=flags.prefix_cache_reset, connections=flags.connections
    )

    def stage(request: SessionCaseRequest) -> BenchClientResult:
        sessions = request.session_load()
        return run_case(request, dataclasses.replace(options, sessions=sessions))

    return run_json_command(
        input_path=flags.input,
        output_path=flags.output,
        request_model=SessionCaseRequest,
        stage=stage,
        failed_result=failed_result,
        what="case",
    )


def failed_result(message: str, raw: bytes) -> BenchClientResult:
    return BenchClientResult(status=ClientStatus.FAILED, error=message)

"""Flags shared by ``run`` and ``sweep``: target, workload, SLOs, reset, budget -> request parts."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import IO

import orjson
from pydantic import ValidationError

from inferlab_bench.case.reset import OPTION_HELP
from inferlab_bench.case.stage import CaseOptions
from inferlab_bench.cli.case import RESET_ENV_VAR, add_connections_flag
from inferlab_bench.errors import ConfigurationError
from inferlab_bench.protocol import (
    SETTING_VALUE_ADAPTER,
    BenchDatasetPreparationRequest,
    DatasetSource,
    RandomSource,
    RequestBody,
    parse_request,
)
from inferlab_bench.runs.population import population_facts
from inferlab_bench.runs.prepare import PREPARE_REQUEST_FILE
from inferlab_bench.runs.requests import Target, Workload, slo_input


def add_case_flags(parser: argparse.ArgumentParser) -> None:
    target = parser.add_argument_group("server")
    target.add_argument(
        "--url",
        action="append",
        required=True,
        help="server base URL, e.g. http://127.0.0.1:8000; repeat it (--engine kube) for "
        "replicas without a load balancer, spread round-robin by AIPerf",
    )
    target.add_argument("--model", required=True, help="served model name")
    target.add_argument(
        "--tokenizer", required=True, help="local tokenizer directory (model locator)"
    )
    target.add_argument("--chat-path", default="/v1/chat/completions", help="chat completions path")
    work = parser.add_argument_group("workload")
    work.add_argument(
        "--population", type=Path, help="population.jsonl from `inferlab-bench prepare`"
    )
    work.add_argument(
        "--prepare-request",
        type=Path,
        help=f"the prepare request behind --population (default: {PREPARE_REQUEST_FILE} beside it)",
    )
    work.add_argument(
        "--random-input-tokens", type=int, help="synthetic prompts of this many tokens"
    )
    work.add_argument(
        "--random-output-tokens", type=int, help="synthetic outputs of this many tokens"
    )
    work.add_argument("--requests", type=int, required=True, help="profiling requests per case")
    work.add_argument(
        "--warmup", type=int, default=0, help="warmup requests (concurrency load only)"
    )
    work.add_argument("--seed", type=int, default=0)
    work.add_argument("--request-body", help="JSON object merged into every request body")
    slo = parser.add_argument_group("SLO (goodput)")
    slo.add_argument("--slo-ttft-ms", type=float)
    slo.add_argument("--slo-tpot-ms", type=float)
    slo.add_argument("--slo-latency-ms", type=float)
    slo.add_argument("--slo-min-ratio", type=float, default=0.9, help="minimum good-request ratio")
    run = parser.add_argument_group("run")
    run.add_argument(
        "--reset-prefix-cache",
        metavar=OPTION_HELP,
        default=os.environ.get(RESET_ENV_VAR) or None,
        help="reset the server's prefix cache before profiling (framework or METHOD:/path)",
    )
    add_connections_flag(run)
    run.add_argument("--budget", type=float, default=3600.0, help="hard deadline per case, seconds")
    run.add_argument(
        "--trials", type=int, default=1, help="repeat each case N times (confidence intervals)"
    )
    run.add_argument("--strict", action="store_true", help="fail when a validity verdict fails")
    run.add_argument("--out", type=Path, required=True, help="output directory")
    run.add_argument("--json", action="store_true", help="print machine-readable results")
    run.add_argument("--verbose", action="store_true", help="stream AIPerf's own console output")


def target_from(args: argparse.Namespace) -> Target:
    return Target(
        url=args.url,
        served_name=args.model,
        tokenizer=args.tokenizer,
        chat_completions_path=args.chat_path,
    )


def case_options(args: argparse.Namespace) -> CaseOptions:
    reset = args.reset_prefix_cache
    return CaseOptions(
        prefix_cache_reset=None if reset in (None, "none") else reset,
        echo=aiperf_echo(args.verbose),
        connections=args.connections,
    )


def aiperf_echo(verbose: bool) -> IO[str]:
    """AIPerf's console output: streamed with --verbose, else only in each case's log file."""
    return sys.stderr if verbose else open(os.devnull, "w")  # noqa: SIM115 (lives as long as the run)


def workload_from(args: argparse.Namespace) -> Workload:
    reset = args.reset_prefix_cache not in (None, "none")
    slo = slo_input(args.slo_ttft_ms, args.slo_tpot_ms, args.slo_latency_ms, args.slo_min_ratio)
    body = _request_body(args.request_body)
    if args.population is not None:
        if args.random_input_tokens is not None or args.random_output_tokens is not None:
            raise ConfigurationError("give either --population or --random-*-tokens, not both")
        return Workload(
            source=_dataset_source(args),
            population=population_facts(args.population),
            seed=args.seed,
            request_body=body,
            slo=slo,
            reset_prefix_cache=reset,
        )
    if args.random_input_tokens is None or args.random_output_tokens is None:
        raise ConfigurationError(
            "workload: give --population FILE, "
            "or both --random-input-tokens and --random-output-tokens"
        )
    source = RandomSource(
        kind="random",
        input_tokens=args.random_input_tokens,
        output_tokens=args.random_output_tokens,
    )
    return Workload(
        source=source,
        population=None,
        seed=args.seed,
        request_body=body,
        slo=slo,
        reset_prefix_cache=reset,
    )


def _dataset_source(args: argparse.Namespace) -> DatasetSource:
    path: Path = args.prepare_request or args.population.parent / PREPARE_REQUEST_FILE
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(
            f"--prepare-request {path}: cannot read the preparation request behind the population",
            hint="pass --prepare-request FILE (the JSON given to `prepare`)",
        ) from exc
    source = parse_request(BenchDatasetPreparationRequest, raw).request_source
    if not isinstance(source, DatasetSource):
        raise ConfigurationError(f"{path}: request_source is not a dataset source")
    return source


def _request_body(text: str | None) -> RequestBody:
    if text is None:
        return {}
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ConfigurationError(f"--request-body: not valid JSON ({exc})") from exc
    if not isinstance(body, dict):
        raise ConfigurationError("--request-body: expected a JSON object")
    for key, value in body.items():
        try:
            SETTING_VALUE_ADAPTER.validate_python(value, strict=True)
        except ValidationError as exc:
            raise ConfigurationError(
                f"--request-body.{key}: not a setting value (JSON without null): {value!r}"
            ) from exc
    return body

"""Flags shared by ``run`` and ``sweep``: target, workload, SLOs, reset, budget -> request parts.

The flags carry no types or defaults here: ``cli.options.CaseFlags`` validates them, and
these builders read the validated values.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import IO

from inferlab_bench.case.conversation import SessionLoad, session_turns
from inferlab_bench.case.reset import OPTION_HELP
from inferlab_bench.case.stage import CaseOptions
from inferlab_bench.cli.case import RESET_ENV_VAR, add_connections_flag
from inferlab_bench.cli.flags import default_of
from inferlab_bench.cli.options import CaseFlags
from inferlab_bench.errors import ConfigurationError
from inferlab_bench.protocol import (
    BenchDatasetPreparationRequest,
    DatasetSource,
    RandomSource,
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
    target.add_argument(
        "--chat-path", help=f"chat completions path ({default_of(CaseFlags, 'chat_path')})"
    )
    work = parser.add_argument_group("workload")
    work.add_argument("--population", help="population.jsonl from `inferlab-bench prepare`")
    work.add_argument(
        "--prepare-request",
        help=f"the prepare request behind --population (default: {PREPARE_REQUEST_FILE} beside it)",
    )
    work.add_argument("--random-input-tokens", help="synthetic prompts of this many tokens")
    work.add_argument("--random-output-tokens", help="synthetic outputs of this many tokens")
    work.add_argument("--requests", required=True, help="profiling requests per case")
    work.add_argument(
        "--warmup",
        help=f"warmup requests (concurrency load only; {default_of(CaseFlags, 'warmup')})",
    )
    work.add_argument(
        "--seed", help=f"seed of the request sequence ({default_of(CaseFlags, 'seed')})"
    )
    work.add_argument("--request-body", help="JSON object merged into every request body")
    talk = parser.add_argument_group(
        "sessions (a conversation population: --requests and --warmup count sessions, "
        "--concurrency sessions in flight)"
    )
    talk.add_argument("--think-time-ms", help="delay before each later turn, ms (default 0)")
    talk.add_argument("--think-time-ratio", help="scale the think time by this (0..1]")
    talk.add_argument(
        "--think-time", choices=["fixed", "exponential"], help="fixed delay, or its mean"
    )
    talk.add_argument(
        "--cache-block-tokens",
        help="the server's prefix-cache block, for the reuse verdict (16; 1 for llama.cpp)",
    )
    slo = parser.add_argument_group("SLO (goodput)")
    slo.add_argument("--slo-ttft-ms", help="time-to-first-token bound, ms")
    slo.add_argument("--slo-tpot-ms", help="time-per-output-token bound, ms")
    slo.add_argument("--slo-latency-ms", help="request latency bound, ms")
    slo.add_argument(
        "--slo-min-ratio",
        help=f"minimum good-request ratio, 0-1 ({default_of(CaseFlags, 'slo_min_ratio')})",
    )
    run = parser.add_argument_group("run")
    run.add_argument(
        "--reset-prefix-cache",
        metavar=OPTION_HELP,
        default=os.environ.get(RESET_ENV_VAR) or None,
        help="reset the server's prefix cache before profiling (framework or METHOD:/path)",
    )
    add_connections_flag(run)
    run.add_argument(
        "--budget", help=f"hard deadline per case, seconds ({default_of(CaseFlags, 'budget')})"
    )
    run.add_argument("--trials", help="repeat each case N times (confidence intervals)")
    run.add_argument("--strict", action="store_true", help="fail when a validity verdict fails")
    run.add_argument("--out", required=True, help="output directory")
    run.add_argument(
        "--json", dest="as_json", action="store_true", help="print machine-readable results"
    )
    run.add_argument("--verbose", action="store_true", help="stream AIPerf's own console output")


def target_from(flags: CaseFlags) -> Target:
    """The server under test: the first ``--url`` (the others are kube replicas)."""
    return Target(
        url=flags.url[0],
        served_name=flags.model,
        tokenizer=flags.tokenizer,
        chat_completions_path=flags.chat_path,
    )


def case_options(flags: CaseFlags) -> CaseOptions:
    reset = flags.reset_prefix_cache
    return CaseOptions(
        prefix_cache_reset=None if reset in (None, "none") else reset,
        echo=aiperf_echo(flags.verbose),
        connections=flags.connections,
        sessions=SessionLoad(
            think_time_ms=flags.think_time_ms,
            think_time_ratio=flags.think_time_ratio,
            think_time=flags.think_time,
            cache_block_tokens=flags.cache_block_tokens,
        ),
    )


def planned_records(flags: CaseFlags, cases: int) -> tuple[int, str]:
    """The records ``cases`` cases of these flags write, and what one is: a request, or for a
    conversation population (whose ``--requests`` and ``--warmup`` count sessions) a turn."""
    sessions = flags.requests + flags.warmup
    turns = None if flags.population is None else session_turns(flags.population, sessions)
    if turns is None:
        return sessions * cases, "requests"
    return turns * cases, "turns"


def aiperf_echo(verbose: bool) -> IO[str]:
    """AIPerf's console output: streamed with --verbose, else only in each case's log file."""
    return sys.stderr if verbose else open(os.devnull, "w")  # noqa: SIM115 (lives as long as the run)


def workload_from(flags: CaseFlags) -> Workload:
    """The workload of validated flags (``CaseFlags`` checked the combination); a population
    must hold what the case consumes, said in flag words before anything starts."""
    reset = flags.reset_prefix_cache not in (None, "none")
    slo = slo_input(flags.slo_ttft_ms, flags.slo_tpot_ms, flags.slo_latency_ms, flags.slo_min_ratio)
    body = flags.request_body or {}
    if flags.population is not None:
        population = population_facts(flags.population)
        check_population_size(population.entries, flags)
        return Workload(
            source=_dataset_source(flags.population, flags.prepare_request),
            population=population,
            seed=flags.seed,
            request_body=body,
            slo=slo,
            reset_prefix_cache=reset,
        )
    assert flags.random_input_tokens is not None and flags.random_output_tokens is not None
    source = RandomSource(
        kind="random",
        input_tokens=flags.random_input_tokens,
        output_tokens=flags.random_output_tokens,
    )
    return Workload(
        source=source,
        population=None,
        seed=flags.seed,
        request_body=body,
        slo=slo,
        reset_prefix_cache=reset,
    )


def check_population_size(entries: int, flags: CaseFlags) -> None:
    """Every case of a run (each trial, sweep point or probe) sends the same first
    ``--warmup`` + ``--requests`` entries: the population must hold that many."""
    needed = flags.warmup + flags.requests
    if entries >= needed:
        return
    warmup = f" + --warmup {flags.warmup} need" if flags.warmup else " needs"
    noun = "entry" if entries == 1 else "entries"
    raise ConfigurationError(
        f"--population {flags.population}: {entries} {noun}, but --requests "
        f"{flags.requests}{warmup} {needed}",
        hint=f"prepare again with --entries {needed} or more, or lower --requests"
        + (" / --warmup" if flags.warmup else ""),
    )


def _dataset_source(population: Path, prepare_request: Path | None) -> DatasetSource:
    path = prepare_request or population.parent / PREPARE_REQUEST_FILE
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(
            f"--prepare-request {path}: cannot read the preparation request behind the population",
            hint="pass --prepare-request FILE (the JSON given to `prepare`)",
        ) from exc
    source = parse_request(BenchDatasetPreparationRequest, raw).request_source
    if not isinstance(source, DatasetSource):
        raise ConfigurationError(
            f"--prepare-request {path}: request_source is not a dataset source"
        )
    return source

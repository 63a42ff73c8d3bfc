"""``inferlab-bench simulate``: run the simulated OpenAI-compatible server in the foreground."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import Any

from pydantic import BaseModel, create_model

from inferlab_bench.cli.flags import bind, default_of, parse_flags, with_flags
from inferlab_bench.cli.options import (
    RESET_CHOICES,
    SERVER_FIELDS,
    FlagModel,
    SimulateFlags,
    simulator_config,
)
from inferlab_bench.errors import InferlabError
from inferlab_bench.simulator import (
    FaultConfig,
    LatencyConfig,
    LimitsConfig,
    SimulatorConfig,
    running_simulator,
)


def _limit_fields() -> dict[str, Any]:
    """The bounds' fields, their defaults, bounds and help, as flags."""
    return {name: (info.annotation, info) for name, info in LimitsConfig.model_fields.items()}


SimulateCommandFlags: type[FlagModel] = create_model(
    "SimulateCommandFlags",
    __base__=SimulateFlags,
    **_limit_fields(),
)
"""``simulate``'s flags: the server's, latency's and faults' and the bounds on clients."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "simulate",
        help="run a simulated OpenAI-compatible server (vLLM-like)",
        argument_default=argparse.SUPPRESS,
    )
    _server_flags(parser)
    latency = parser.add_argument_group("latency model (milliseconds)")
    _model_flags(latency, LatencyConfig)
    latency.add_argument("--zero-latency", action="store_true", help="no modeled latency at all")
    _model_flags(parser.add_argument_group("fault injection (rates are 0..1, seeded)"), FaultConfig)
    _model_flags(parser.add_argument_group("bounds on what one client may send"), LimitsConfig)
    bind(parser, run)


def _server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help=f"address to bind ({default_of(SimulateFlags, 'host')})")
    parser.add_argument("--port", help="0 picks a free port (default 8000)")
    parser.add_argument("--model", help="served model id")
    parser.add_argument("--tokenizer", help="tokenizer directory for exact prompt token counts")
    parser.add_argument(
        "--ground-truth", dest="ground_truth_path", help="append ground-truth JSONL here"
    )
    parser.add_argument("--seed", help="seed of every random decision")
    parser.add_argument(
        "--reset-endpoint",
        dest="reset_endpoints",
        choices=sorted(RESET_CHOICES),
        help="prefix-cache reset routes: vllm /reset_prefix_cache, sglang /flush_cache",
    )
    for name in SERVER_FIELDS:
        _field_flag(parser, SimulatorConfig, name)


def _model_flags(group: argparse._ArgumentGroup, model: type[BaseModel]) -> None:
    for name in model.model_fields:
        _field_flag(group, model, name)


def _field_flag(
    group: argparse.ArgumentParser | argparse._ArgumentGroup, model: type[BaseModel], name: str
) -> None:
    """A flag named after a config field, its help from the field (its bounds live there)."""
    field = model.model_fields[name]
    flag = "--" + name.replace("_", "-")
    if field.annotation is bool:
        group.add_argument(flag, action="store_true", help=field.description)
    else:
        group.add_argument(flag, help=f"{field.description} ({default_of(model, name)})")


def config_from_args(args: argparse.Namespace) -> SimulatorConfig:
    """The one SimulatorConfig these flags describe (a bad flag raises ``ConfigurationError``)."""
    return _config(parse_flags(SimulateCommandFlags, args))


def _config(flags: FlagModel) -> SimulatorConfig:
    limits = LimitsConfig(**{name: getattr(flags, name) for name in LimitsConfig.model_fields})
    return simulator_config(flags).model_copy(update={"limits": limits})


def run(args: argparse.Namespace) -> int:
    return with_flags(args, SimulateCommandFlags, _serve)


NO_TOKENIZER_WARNING = (
    "inferlab-bench: warning: no --tokenizer: prompt tokens are counted by a rough word rule, "
    "so a client's prompt-token reconciliation will fail; pass --tokenizer DIR (the tokenizer "
    "the client is given)"
)


def _serve(flags: FlagModel) -> int:
    config = _config(flags)
    if config.tokenizer is None:
        print(NO_TOKENIZER_WARNING, file=sys.stderr, flush=True)
    try:
        with running_simulator(config) as sim:
            print(f"inferlab-bench simulator serving {config.model} at {sim.base_url}", flush=True)
            _wait_for_signal()
    except InferlabError as exc:
        print(f"inferlab-bench: error: {exc}", file=sys.stderr)
        return 1
    return 0


def _wait_for_signal() -> None:
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handle)
    while not stop.wait(0.5):
        pass

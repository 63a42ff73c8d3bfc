"""``inferlab-bench simulate``: run the simulated OpenAI-compatible server in the foreground."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from pydantic import BaseModel, ValidationError

from inferlab_bench.errors import InferlabError
from inferlab_bench.simulator import FaultConfig, LatencyConfig, SimulatorConfig, running_simulator
from inferlab_bench.simulator.config import ResetEndpoint

_RESET_CHOICES: dict[str, tuple[ResetEndpoint, ...]] = {
    "vllm": ("vllm",),
    "sglang": ("sglang",),
    "both": ("vllm", "sglang"),
    "none": (),
}
# SimulatorConfig fields offered as flags of the same name (defaults and help from the model).
_SERVER_FIELDS = ("max_model_len", "default_max_tokens", "block_size", "cache_capacity_blocks")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("simulate", help="run a simulated OpenAI-compatible server (vLLM-like)")
    _server_flags(parser)
    latency = parser.add_argument_group("latency model (milliseconds)")
    _model_flags(latency, LatencyConfig)
    latency.add_argument("--zero-latency", action="store_true", help="no modeled latency at all")
    _model_flags(parser.add_argument_group("fault injection (rates are 0..1, seeded)"), FaultConfig)
    parser.set_defaults(handler=run)


def _server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--model", default="sim-model", help="served model id")
    parser.add_argument("--tokenizer", help="tokenizer directory for exact prompt token counts")
    parser.add_argument("--ground-truth", type=Path, help="append ground-truth JSONL here")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random decision")
    parser.add_argument(
        "--reset-endpoint",
        choices=sorted(_RESET_CHOICES),
        default="both",
        help="prefix-cache reset routes: vllm /reset_prefix_cache, sglang /flush_cache",
    )
    for name in _SERVER_FIELDS:
        _field_flag(parser, SimulatorConfig, name)


def _model_flags(group: argparse._ArgumentGroup, model: type[BaseModel]) -> None:
    for name in model.model_fields:
        _field_flag(group, model, name)


def _field_flag(
    group: argparse.ArgumentParser | argparse._ArgumentGroup, model: type[BaseModel], name: str
) -> None:
    field = model.model_fields[name]
    flag = "--" + name.replace("_", "-")
    if field.annotation is bool:
        group.add_argument(flag, action="store_true", help=field.description)
    else:
        kind: Any = field.annotation
        group.add_argument(flag, type=kind, default=field.default, help=field.description)


def _values(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    return {name: getattr(args, name) for name in model.model_fields}


def config_from_args(args: argparse.Namespace) -> SimulatorConfig:
    """The one SimulatorConfig these flags describe."""
    if args.zero_latency:
        latency = LatencyConfig.zero()
    else:
        latency = LatencyConfig(**_values(args, LatencyConfig))
    return SimulatorConfig(
        model=args.model,
        tokenizer=args.tokenizer,
        ground_truth_path=args.ground_truth,
        seed=args.seed,
        host=args.host,
        port=args.port,
        reset_endpoints=_RESET_CHOICES[args.reset_endpoint],
        latency=latency,
        faults=FaultConfig(**_values(args, FaultConfig)),
        **{name: getattr(args, name) for name in _SERVER_FIELDS},
    )


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        with running_simulator(config) as sim:
            print(f"inferlab-bench simulator serving {config.model} at {sim.base_url}", flush=True)
            _wait_for_signal()
    except ValidationError as exc:
        print(f"inferlab-bench simulate: invalid options: {exc}", file=sys.stderr)
        return 2
    except InferlabError as exc:
        print(f"inferlab-bench simulate: {exc}", file=sys.stderr)
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

"""``inferlab-bench simulate``: run the simulated OpenAI-compatible server in the foreground."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from pydantic import ValidationError

from inferlab_bench.errors import InferlabError
from inferlab_bench.simulator import FaultConfig, LatencyConfig, SimulatorConfig, running_simulator
from inferlab_bench.simulator.config import ResetEndpoint

_RESET_CHOICES: dict[str, tuple[ResetEndpoint, ...]] = {
    "vllm": ("vllm",),
    "sglang": ("sglang",),
    "both": ("vllm", "sglang"),
    "none": (),
}
_LATENCY_FLAGS = (
    "prefill_base_ms",
    "prefill_ms_per_token",
    "decode_base_ms",
    "decode_ms_per_seq",
    "max_num_seqs",
    "jitter",
)
_FAULT_FLAGS = tuple(FaultConfig.model_fields)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("simulate", help="run a simulated OpenAI-compatible server (vLLM-like)")
    _server_flags(parser)
    _latency_flags(parser.add_argument_group("latency model (milliseconds)"))
    _fault_flags(parser.add_argument_group("fault injection (rates are 0..1, seeded)"))
    parser.set_defaults(handler=run)


def _server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--model", default="sim-model", help="served model id")
    parser.add_argument("--tokenizer", help="tokenizer directory for exact prompt token counts")
    parser.add_argument("--ground-truth", type=Path, help="append ground-truth JSONL here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--reset-endpoint",
        choices=sorted(_RESET_CHOICES),
        default="both",
        help="prefix-cache reset routes: vllm /reset_prefix_cache, sglang /flush_cache",
    )
    parser.add_argument("--max-model-len", type=int, default=32768)
    parser.add_argument("--block-size", type=int, default=16, help="prefix-cache block (tokens)")
    parser.add_argument("--cache-capacity-blocks", type=int, default=65536)


def _latency_flags(group: argparse._ArgumentGroup) -> None:
    defaults = LatencyConfig()
    for name in _LATENCY_FLAGS:
        kind = int if name == "max_num_seqs" else float
        group.add_argument(_flag(name), type=kind, default=getattr(defaults, name))
    group.add_argument("--zero-latency", action="store_true", help="no modeled latency at all")


def _fault_flags(group: argparse._ArgumentGroup) -> None:
    for name, field in FaultConfig.model_fields.items():
        if field.annotation is bool:
            group.add_argument(_flag(name), action="store_true")
        else:
            group.add_argument(_flag(name), type=field.annotation, default=field.default)  # type: ignore[arg-type]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def config_from_args(args: argparse.Namespace) -> SimulatorConfig:
    """The one SimulatorConfig these flags describe."""
    if args.zero_latency:
        latency = LatencyConfig.zero()
    else:
        latency = LatencyConfig(**{name: getattr(args, name) for name in _LATENCY_FLAGS})
    return SimulatorConfig(
        model=args.model,
        tokenizer=args.tokenizer,
        ground_truth_path=args.ground_truth,
        seed=args.seed,
        host=args.host,
        port=args.port,
        reset_endpoints=_RESET_CHOICES[args.reset_endpoint],
        max_model_len=args.max_model_len,
        block_size=args.block_size,
        cache_capacity_blocks=args.cache_capacity_blocks,
        latency=latency,
        faults=FaultConfig(**{name: getattr(args, name) for name in _FAULT_FLAGS}),
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

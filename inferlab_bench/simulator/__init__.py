"""A simulated OpenAI-compatible inference server with ground truth and faults."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from inferlab_bench.simulator.config import (
    FaultConfig,
    LatencyConfig,
    LimitsConfig,
    SimulatorConfig,
)

if TYPE_CHECKING:
    from inferlab_bench.simulator.server import RunningSimulator, running_simulator

__all__ = [
    "FaultConfig",
    "LatencyConfig",
    "LimitsConfig",
    "RunningSimulator",
    "SimulatorConfig",
    "running_simulator",
]


def __getattr__(name: str) -> Any:
    """The server (HTTP stack) is imported on first use: reading a configuration, as every
    command's flags do, should not pay for it."""
    if name in ("RunningSimulator", "running_simulator"):
        from inferlab_bench.simulator import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

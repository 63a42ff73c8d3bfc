"""A simulated OpenAI-compatible inference server with ground truth and faults."""

from inferlab_bench.simulator.config import FaultConfig, LatencyConfig, SimulatorConfig
from inferlab_bench.simulator.server import RunningSimulator, running_simulator

__all__ = [
    "FaultConfig",
    "LatencyConfig",
    "RunningSimulator",
    "SimulatorConfig",
    "running_simulator",
]

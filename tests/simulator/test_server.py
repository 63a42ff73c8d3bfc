"""running_simulator: start-up, the handle's API, clean stop, start-up errors."""

from __future__ import annotations

import httpx
import pytest

from inferlab_bench.errors import ServerError
from inferlab_bench.simulator import SimulatorConfig, running_simulator

pytestmark = pytest.mark.timeout(30)


def test_serves_then_stops() -> None:
    with running_simulator(SimulatorConfig()) as sim:
        assert sim.base_url == f"http://127.0.0.1:{sim.port}" and sim.port > 0
        assert httpx.get(f"{sim.base_url}/health").status_code == 200
        assert sim.reset_count == 0 and sim.ground_truth() == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{sim.base_url}/health")


def test_busy_port_is_a_server_error() -> None:
    with (
        running_simulator(SimulatorConfig()) as sim,
        pytest.raises(ServerError, match="cannot listen"),
        running_simulator(SimulatorConfig(port=sim.port)),
    ):
        pass


def test_config_is_strict() -> None:
    with pytest.raises(ValueError, match="extra"):
        SimulatorConfig(modle="x")  # type: ignore[call-arg]
    assert SimulatorConfig(reset_endpoints=("vllm", "vllm")).reset_endpoints == ("vllm",)

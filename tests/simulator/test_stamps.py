"""The ground truth's stamps: both sides of each write, the model's due time, and the lag."""

from __future__ import annotations

import socket
import time

import pytest

from inferlab_bench.simulator import LatencyConfig
from inferlab_bench.simulator.latency import prefill_seconds
from tests.simulator.conftest import StartSimulator

pytestmark = pytest.mark.timeout(30)

LATENCY = LatencyConfig(prefill_base_ms=8, prefill_ms_per_token=0, decode_base_ms=4)
REQUEST = (
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s"
)


def _first_byte_ns(port: int) -> int:
    """Send one streaming completion on a raw socket; wall ns when its first chunk arrived."""
    body = b'{"prompt":"hello","max_tokens":3,"ignore_eos":true,"stream":true}'
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(REQUEST % (len(body), body))
        seen = b""
        while b'"text"' not in seen:
            seen += sock.recv(65536)
            stamp = time.time_ns()
        while not seen.endswith(b"0\r\n\r\n"):
            seen += sock.recv(65536)
    return stamp


def test_a_client_never_sees_a_token_before_the_write_began(
    start_simulator: StartSimulator,
) -> None:
    sim = start_simulator(latency=LATENCY)
    seen = [_first_byte_ns(sim.port) for _ in range(15)]
    truth = [r for r in sim.ground_truth() if r["kind"] == "request"]
    for client_ns, record in zip(seen, truth, strict=True):
        assert record["first_token_before_ns"] <= client_ns
        assert record["first_token_before_ns"] <= record["first_token_ns"]
        assert record["last_token_before_ns"] <= record["last_token_ns"] <= record["end_ns"]


def test_stamps_order_and_the_model_due_time(start_simulator: StartSimulator) -> None:
    sim = start_simulator(latency=LATENCY)
    _first_byte_ns(sim.port)
    (r,) = sim.ground_truth()
    assert r["arrival_ns"] <= r["handler_ns"] <= r["admitted_ns"] <= r["first_token_before_ns"]
    # Admitted at once: the model's first token falls due one prefill after arrival.
    model_ns = round(prefill_seconds(LATENCY, r["prompt_tokens"]) * 1e9)
    assert abs(r["first_token_due_ns"] - r["arrival_ns"] - model_ns) < 1_000
    assert r["first_token_lag_ns"] == r["first_token_before_ns"] - r["first_token_due_ns"]
    assert r["max_token_lag_ns"] >= r["first_token_lag_ns"]
    assert 0 <= r["max_write_ns"] < 50_000_000
    assert (r["measured_from"], r["measured_to"]) == ("arrival_ns", "first_token_before_ns")
    assert r["ttft_ns"] == r["first_token_before_ns"] - r["arrival_ns"]
    assert r["e2e_ns"] == r["end_ns"] - r["arrival_ns"]

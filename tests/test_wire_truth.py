"""The wire truth of the calibration (benchmarks/wire_truth.py): a real loopback capture.

A server thread writes stream events on a schedule; a client reads them on time, or late by
a known amount (it sleeps before its first read). Captured on ``lo`` and joined to the
client's reads as AIPerf's raw export records them, the client-added TTFT must be about
zero on time and about the sleep when late: the truth has to be right both ways before it
scores a verdict. Skipped where capturing packets is not permitted (CAP_NET_RAW).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import orjson
import pytest

from benchmarks import wire_truth
from benchmarks.wire_truth import Packet

EVENTS, GAP_S, LATE_S = 8, 0.01, 0.06


def _can_capture() -> bool:
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800)).close()
    except (PermissionError, AttributeError, OSError):
        return False
    return True


def _event(i: int) -> bytes:
    delta = {"role": "assistant", "content": None} if i == 0 else {"content": f" t{i}"}
    return orjson.dumps({"choices": [{"index": 0, "delta": delta}]})


def _serve(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    with conn:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        for i in range(EVENTS):
            time.sleep(GAP_S)
            conn.sendall(b"data: " + _event(i) + b"\n\n")
        conn.sendall(b"data: [DONE]\n\n")


def _exchange(port: int, late_s: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """One request; the client's record and raw record shaped as AIPerf writes them."""
    start = time.perf_counter_ns()  # before the connect, as AIPerf's start is
    client = socket.create_connection(("127.0.0.1", port))
    client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nX-Request-ID: r1\r\n\r\n{}")
    time.sleep(late_s)
    responses: list[dict[str, Any]] = []
    pending, done = b"", False
    while not done:
        data = client.recv(65536)
        if not data:
            break
        read_at = time.perf_counter_ns()
        *complete, pending = (pending + data).split(b"\n\n")
        for block in complete:  # the response's head rides with the first event
            line = block[block.find(b"data: ") + 6 :]
            responses.append(
                {"perf_ns": read_at, "packets": [{"name": "data", "value": line.decode()}]}
            )
            done = line == b"[DONE]"
    client.close()
    content = [r["perf_ns"] for r in responses[1:-1]]
    metrics = {
        "time_to_first_token": {"value": (content[0] - start) / 1e6},
        "request_latency": {"value": (content[-1] - start) / 1e6},
        "output_sequence_length": {"value": len(content)},
    }
    meta = {"x_request_id": "r1", "benchmark_phase": "profiling"}
    raw = {"metadata": meta, "start_perf_ns": start, "responses": responses}
    return {"metadata": meta, "metrics": metrics, "error": None}, raw


@pytest.mark.skipif(not _can_capture(), reason="capturing loopback packets needs CAP_NET_RAW")
@pytest.mark.parametrize("late_s", [0.0, LATE_S])
def test_the_wire_measures_what_the_client_added(late_s: float) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = threading.Thread(target=_serve, args=(listener,), daemon=True)
    with wire_truth.capture(port) as captured:
        server.start()
        record, raw = _exchange(port, late_s)
        server.join(5)
    listener.close()
    requests = wire_truth.wire_requests(captured.packets)
    rows, missing = wire_truth.wire_rows([record], [raw], requests)
    assert (len(rows), missing, captured.dropped) == (1, 0, 0)
    added = rows[0].added
    # The server wrote its first token GAP_S after the request, on time either way.
    assert rows[0].wire_ttft_ms == pytest.approx(2 * GAP_S * 1e3, abs=15)
    if late_s:
        # What was written during the sleep was read at its end: the first token (written
        # 2 gaps in) about 40 ms late; the stream's end (8 gaps in) was read on time.
        assert 25 < added["ttft"] < 65
    else:
        assert abs(added["ttft"]) < 5  # a wake-up and this process's other threads
    assert abs(added["e2e"]) < 5


def _packet(ns: int, sequence: int, payload: bytes) -> Packet:
    return Packet(ns, (50000, 8000), False, payload, sequence)


def test_a_retransmitted_segment_keeps_its_first_time() -> None:
    first = _packet(10, 2**32 - 3, b"data: a\n\n")  # the sequence wraps inside it
    again = _packet(20, 2**32 - 3, b"data: a\n\n")  # all of it sent before
    overlap = _packet(30, 2**32 - 3, b"data: a\n\ndata: b\n\n")  # the old part, then new
    kept = wire_truth.first_sendings([again, first, overlap])
    assert [(p.ns, p.payload) for p in kept] == [(10, b"data: a\n\n"), (30, b"data: b\n\n")]
    assert kept[1].sequence == 6  # (2**32 - 3 + 9) mod 2**32


def test_a_request_that_opened_its_connection_counts_the_servers_handshake() -> None:
    def sent(ns: int, payload: bytes) -> Packet:
        return Packet(ns, (50000, 8000), True, payload, ns)

    packets = [
        sent(5, b""),  # SYN
        _packet(6, 99, b""),  # SYN-ACK: the server's 1 ns; the client's first byte 2 ns later
        sent(8, b"POST / HTTP/1.1\r\nX-Request-ID: a\r\n\r\n{}"),
        _packet(9, 100, b"data: x\n\n"),
        sent(50, b"POST / HTTP/1.1\r\nX-Request-ID: b\r\n\r\n{}"),
        _packet(60, 200, b"data: y\n\n"),
    ]
    found = wire_truth.wire_requests(packets)
    assert (found["a"].sent_ns, found["a"].server_before_ns) == (8, 1)
    assert (found["b"].sent_ns, found["b"].server_before_ns) == (50, 0)
    assert (found["a"].events, found["b"].events) == (((9, b"x"),), ((60, b"y"),))

"""The ground-truth log: complete JSONL lines on disk, the same records in memory."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import pytest

from tests.simulator.conftest import StartSimulator, chat_body

pytestmark = pytest.mark.timeout(30)


def test_file_and_memory_hold_the_same_complete_records(
    start_simulator: StartSimulator, client: httpx.Client, tmp_path: Path
) -> None:
    path = tmp_path / "gt" / "truth.jsonl"
    sim = start_simulator(ground_truth_path=path)
    headers = {"X-Request-ID": "req-1", "X-Correlation-ID": "conv-1"}
    client.post(
        f"{sim.base_url}/v1/chat/completions",
        headers=headers,
        json=chat_body("first", max_tokens=4, min_tokens=4, ignore_eos=True),
    )
    client.post(f"{sim.base_url}/reset_prefix_cache")
    client.post(
        f"{sim.base_url}/v1/chat/completions", json=chat_body("second", max_tokens=2, stream=False)
    )
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    on_disk = [json.loads(line) for line in raw.splitlines()]
    assert on_disk == sim.ground_truth()
    first, reset, second = on_disk
    assert (
        reset["kind"] == "reset"
        and reset["status"] == 200
        and reset["path"] == "/reset_prefix_cache"
    )
    assert first["kind"] == "request" and first["path"] == "/v1/chat/completions"
    assert (first["x_request_id"], first["x_correlation_id"], first["headers_request_id"]) == (
        "req-1",
        "conv-1",
        "req-1",
    )
    assert first["stream"] is True and second["stream"] is False
    assert (first["max_tokens"], first["min_tokens"], first["ignore_eos"]) == (4, 4, True)
    assert first["completion_tokens"] == 4 and first["status"] == 200 and first["fault"] is None
    assert (
        first["arrival_ns"] <= first["first_token_ns"] <= first["last_token_ns"] <= first["end_ns"]
    )
    assert first["arrival_ns"] < reset["time_ns"] < second["arrival_ns"]
    assert (
        len(first["prompt_sha256"]) == 64
        and first["first_user_sha256"] != second["first_user_sha256"]
    )


def test_a_second_server_appends(
    start_simulator: StartSimulator, client: httpx.Client, tmp_path: Path
) -> None:
    path = tmp_path / "truth.jsonl"
    for _ in range(2):
        sim = start_simulator(ground_truth_path=path)
        client.post(f"{sim.base_url}/flush_cache")
    assert len(path.read_text().splitlines()) == 2


def _send_slowly(sock: socket.socket, body: bytes, pause_s: float) -> tuple[int, int]:
    """Send the head of a POST, pause, then its body; the wall-clock ns around the head."""
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    before = time.time_ns()
    sock.sendall(head)
    after = time.time_ns()
    time.sleep(pause_s)
    sock.sendall(body)
    return before, after


def _read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(
        next(
            line.split(b":")[1]
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
    )
    while len(rest) < length:
        rest += sock.recv(65536)
    return head


def test_arrival_is_when_the_first_byte_of_each_request_was_parsed(
    start_simulator: StartSimulator,
) -> None:
    # A client that sends its headers, waits, then sends the body: the server's arrival is
    # the head's, not the handler's (which runs once the body is in). Two requests on one
    # keep-alive connection: each is stamped at its own first byte, not the connection's.
    sim = start_simulator()
    body = json.dumps(chat_body("slow", max_tokens=2, stream=False)).encode()
    pause = 0.3
    with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as sock:
        sent = [_send_slowly(sock, body, pause)]
        assert b" 200 " in _read_response(sock)
        time.sleep(0.1)
        sent.append(_send_slowly(sock, body, pause))
        assert b" 200 " in _read_response(sock)
    records = [r for r in sim.ground_truth() if r["kind"] == "request"]
    assert len(records) == 2
    for record, (before, after) in zip(records, sent, strict=True):
        assert record["arrival_stamped_at"] == "parser"
        assert before <= record["arrival_ns"] <= after + 50_000_000  # well before the body
        # The body came a pause after the head; the parser may stamp the head late on a busy
        # machine (by up to the 50 ms above), so the pause is counted from the head's send.
        assert record["end_ns"] - before >= pause * 1e9


def test_memory_keeps_the_latest_records_and_the_file_keeps_them_all(tmp_path: Path) -> None:
    from inferlab_bench.simulator.ground_truth import GroundTruthLog

    path = tmp_path / "truth.jsonl"
    with GroundTruthLog(path, memory=3) as log:
        for i in range(5):
            log.append({"kind": "request", "n": i})
        assert [r["n"] for r in log.records()] == [2, 3, 4]
    assert [json.loads(line)["n"] for line in path.read_text().splitlines()] == [0, 1, 2, 3, 4]

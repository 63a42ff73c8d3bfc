"""A request body read within the server's bounds: media type (415), size (413), time (408)."""

from __future__ import annotations

import socket
import threading
import time

import httpx

from inferlab_bench.simulator import LimitsConfig
from tests.simulator.conftest import StartSimulator, chat_body

CHAT = "/v1/chat/completions"


def test_a_declared_body_beyond_the_bound_is_413_before_it_is_read(
    start_simulator: StartSimulator,
) -> None:
    sim = start_simulator(limits=LimitsConfig(max_body_bytes=1000))
    with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as sock:
        # The head alone: the answer comes without one byte of the body sent.
        sock.sendall(
            f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 100000000\r\n\r\n".encode()
        )
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413"), answer
    assert b"at most 1000 bytes served, declared 100000000 bytes" in answer
    assert b'"type":"RequestTooLargeError"' in answer


def test_a_chunked_body_is_413_once_it_grows_past_the_bound(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator(limits=LimitsConfig(max_body_bytes=1000))

    def pieces() -> object:
        for _ in range(100):
            yield b"x" * 100

    r = client.post(sim.base_url + CHAT, content=pieces())  # type: ignore[arg-type]
    assert r.status_code == 413
    assert "more than 1000 bytes sent" in r.json()["error"]["message"]
    assert client.post(sim.base_url + CHAT, json=chat_body(max_tokens=2)).status_code == 200


def test_media_types(start_simulator: StartSimulator, client: httpx.Client) -> None:
    sim = start_simulator()
    url = sim.base_url + CHAT
    body = httpx.Request("POST", url, json=chat_body(max_tokens=1)).content
    for kind, status in (
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("application/json; charset=utf-8", 200),
        ("application/vnd.api+json", 200),
    ):
        r = client.post(url, content=body, headers={"content-type": kind})
        assert r.status_code == status, (kind, r.text)
    r = client.post(url, content=body)  # no Content-Type at all: read as JSON
    assert r.status_code == 200
    r = client.post(sim.base_url + "/tokenize", content=b"{}", headers={"content-type": "a/b"})
    assert r.status_code == 415 and "application/json" in r.json()["error"]["message"]


def test_a_body_that_stops_coming_is_408_and_closed(start_simulator: StartSimulator) -> None:
    sim = start_simulator(limits=LimitsConfig(body_timeout_seconds=0.3))
    with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as sock:
        sock.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{{".encode())
        started = time.monotonic()
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408") and b"connection: close" in answer.lower()
    assert 0.25 < time.monotonic() - started < 5


def test_a_long_answer_with_no_latency_does_not_hold_the_loop(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    # 32000 tokens due at once used to be written without one yield to the event loop.
    sim = start_simulator()
    done = threading.Event()

    def long_stream() -> None:
        body = chat_body(max_tokens=32000, ignore_eos=True)
        with (
            httpx.Client(timeout=60) as other,
            other.stream("POST", sim.base_url + CHAT, json=body) as r,
        ):
            for _ in r.iter_bytes():
                pass
        done.set()

    thread = threading.Thread(target=long_stream)
    thread.start()
    worst = 0.0
    answered = 0
    while not done.is_set():
        start = time.perf_counter()
        assert client.get(sim.base_url + "/health").status_code == 200
        worst = max(worst, time.perf_counter() - start)
        answered += 1
        time.sleep(0.01)
    thread.join()
    # Measured: 36-46 ms at worst while the stream ran; before the yields, 1.06 s (all of it).
    assert answered >= 3 and worst < 0.5, (answered, worst)

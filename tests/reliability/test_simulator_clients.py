"""Hostile clients of the simulator: each gets a clear error, memory stays bounded, /health answers.

One ``simulate`` process (the real CLI, Qwen2's tokenizer) meets every attack of
``hostile.attacks()`` in turn while a prober times ``GET /health`` on its own connection.
Before the bounds, a 100 MB body was tokenized on the event loop (82 s, 12 GB) and
``n=3000000`` took 2.5 GB and stalled /health for 15 s.

The /health bound here is 1 s: on this shared 2-core machine a single probe of an idle
server has taken up to 227 ms (the server waiting for a core), while every attack answered
within 76 ms at worst over three runs of ``benchmarks/simulator_hostile.py``; the printed
figures there are the 100 ms claim. The memory bound: the process peaked 160 MB above its
start after every attack (encoding a 943 kB prompt costs about 110 MB), so 300 MB.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.reliability import hostile
from tests.reliability.hostile import Server

HEALTH_BOUND_MS = 1000.0
MEMORY_BOUND_MB = 300.0
IDLE_S = 1.0
ATTACKS = hostile.attacks()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    from inferlab_bench.runs.demo import TOKENIZER_DIR

    flags = ["--tokenizer", TOKENIZER_DIR, "--zero-latency"]
    flags += ["--idle-timeout-seconds", str(IDLE_S), "--body-timeout-seconds", str(IDLE_S)]
    with hostile.simulator_process(*flags) as running:
        yield running


def _bounded(server: Server, probe: hostile.HealthProbe) -> None:
    assert probe.failures == 0 and probe.latencies, "/health stopped answering"
    assert probe.worst_ms < HEALTH_BOUND_MS, f"/health took {probe.worst_ms:.0f} ms"
    grown = server.peak_rss_mb() - server.start_mb
    assert grown < MEMORY_BOUND_MB, f"peak RSS {grown:.0f} MB above the start"


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack_gets_a_clear_error(server: Server, attack: hostile.Attack) -> None:
    with hostile.probing(server) as probe:
        answer = attack.send(server)
    assert answer.status == attack.status, answer
    assert attack.says in answer.message, answer.message
    _bounded(server, probe)


def test_honest_request_still_served_after_the_attacks(server: Server) -> None:
    answer = hostile.json_post(server, hostile.chat())
    assert answer.status == 200 and b'"completion_tokens":4' in answer.body


def test_a_refused_body_leaves_its_connection_usable(server: Server) -> None:
    # The rest of a 413'd body is read and dropped, so the client reads the answer (no
    # reset) and its next request on the same connection is served.
    big = 4 * hostile.MB
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(hostile.head(hostile.CHAT, length=big))
        for piece in hostile.filler(big):
            sock.sendall(piece)
        assert hostile.read_answer(sock).status == 413
        body = hostile.chat()
        sock.sendall(hostile.head(hostile.CHAT, length=len(body)) + body)
        assert hostile.read_answer(sock).status == 200


def test_slowloris_head_is_closed_at_the_idle_timeout(server: Server) -> None:
    with hostile.probing(server) as probe:
        answer = hostile.slow_head(server, gap=0.2, limit=IDLE_S + 4)
    assert answer.closed_after_s is not None, "a head dribbled for 5 s was never closed"
    assert IDLE_S - 0.05 <= answer.closed_after_s < IDLE_S + 2
    _bounded(server, probe)


def test_silent_connection_is_closed_at_the_idle_timeout(server: Server) -> None:
    answer = hostile.silent(server, limit=IDLE_S + 4)
    assert answer.closed_after_s is not None, "a connection that sent nothing stayed open"
    assert IDLE_S - 0.05 <= answer.closed_after_s < IDLE_S + 2


def test_many_silent_connections_do_not_stop_health(server: Server) -> None:
    socks = [socket.create_connection((server.host, server.port)) for _ in range(200)]
    try:
        with hostile.probing(server) as probe:
            answer = hostile.json_post(server, hostile.chat())
        assert answer.status == 200
        _bounded(server, probe)
    finally:
        for sock in socks:
            sock.close()


def test_slow_body_gets_408(server: Server) -> None:
    with hostile.probing(server) as probe:
        answer = hostile.slow_body(server, wait=IDLE_S)
    assert answer.status == 408 and "--body-timeout-seconds" in answer.message
    _bounded(server, probe)

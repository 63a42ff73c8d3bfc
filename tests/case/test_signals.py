"""A signal at any phase of a case ends in a failed result, promptly, with no traceback.

The server here holds the request of the phase under test (the reset, the probe of
``/v1/models``) unanswered until the signal arrives. Before the stage was
guarded for its whole life, SIGTERM there exited -15 with no result and SIGINT printed a
``KeyboardInterrupt`` traceback.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inferlab_bench.protocol import BenchClientResult, ClientStatus
from tests.case.support import make_request, write_population


class HalfServer:
    """Answers ``GET`` at once (an empty model list) and never answers a ``POST``: a case with
    a reset sits in the reset. With ``hold_get`` it never answers a GET either: the case sits
    in its probe of the server."""

    def __init__(self, *, hold_get: bool) -> None:
        self.hold_get = hold_get
        self.seen = threading.Event()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.2)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn = self._listener.accept()[0]
            except OSError:
                continue
            self._held.append(conn)
            head = conn.recv(65536)
            if head.startswith(b"GET") and not self.hold_get:
                body = b'{"object":"list","data":[]}'
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                continue
            self.seen.set()  # a request we hold: the case is in the phase under test

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for conn in self._held:
            conn.close()
        self._listener.close()


@pytest.fixture
def half_server(request: pytest.FixtureRequest) -> Iterator[HalfServer]:
    server = HalfServer(hold_get=request.param)
    yield server
    server.close()


def start_case(tmp_path: Path, port: int, *, reset: str) -> subprocess.Popen[str]:
    population = write_population(tmp_path / "population.jsonl", [4, 5])
    request = make_request(
        port=port,
        artifact_dir=tmp_path / "case",
        population=population,
        request_count=2,
        reset_prefix_cache=True,
    )
    (tmp_path / "request.json").write_text(request.model_dump_json())
    command = [sys.executable, "-m", "inferlab_bench", "case"]
    command += ["--input", str(tmp_path / "request.json"), "--output", str(tmp_path / "out.json")]
    command += ["--prefix-cache-reset", reset]
    return subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def stop_and_read(
    process: subprocess.Popen[str], server: HalfServer, sig: int, tmp_path: Path
) -> tuple[Any, str]:
    assert server.seen.wait(60), "the case never reached the phase"
    time.sleep(0.3)
    sent = time.monotonic()
    process.send_signal(sig)
    _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert time.monotonic() - sent < 3.0, "the stage did not stop promptly"
    result = BenchClientResult.model_validate_json((tmp_path / "out.json").read_bytes())
    return result, err


@pytest.mark.parametrize(
    ("half_server", "phase"),
    [(False, "resetting the prefix cache"), (True, "asking the server")],
    ids=["during-reset", "during-probe"],
    indirect=["half_server"],
)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_outside_aiperf_gives_a_failed_result(
    half_server: HalfServer, tmp_path: Path, phase: str, sig: int, check_v6: Any
) -> None:
    process = start_case(tmp_path, half_server.port, reset="vllm")
    result, err = stop_and_read(process, half_server, sig, tmp_path)
    name = signal.Signals(sig).name
    assert result.status is ClientStatus.FAILED
    assert f"case interrupted by a signal ({name}) while {phase}" in (result.error or "")
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert result.native_command == []  # AIPerf never started
    check_v6("BenchClientResult", result.model_dump(mode="json"))

"""Hostile clients of the simulator: its own process, a /health prober, and raw-socket attacks.

Shared by ``test_simulator_clients.py`` (which asserts) and ``benchmarks/simulator_hostile.py``
(which prints). Every attack speaks HTTP/1.1 over a plain socket, so a body of 100 MB is sent
in 1 MB pieces and never held whole by the client.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import orjson

MB = 1024 * 1024
CHAT = "/v1/chat/completions"


@dataclass(frozen=True)
class Answer:
    """What the server said: a status and body, or that it closed the connection."""

    status: int | None  # None: closed without an answer
    body: bytes = b""
    closed_after_s: float | None = None

    @property
    def message(self) -> str:
        """The OpenAI-shaped error's message ('' when the body is not one)."""
        try:
            return str(orjson.loads(self.body)["error"]["message"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return ""


@dataclass
class Server:
    """A ``simulate`` process: its URL parts and pid."""

    process: subprocess.Popen[str]
    host: str
    port: int
    start_mb: float = 0.0  # resident memory once serving

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def peak_rss_mb(self) -> float:
        """The process's peak resident memory so far (VmHWM), in MiB."""
        return _status_kb(self.process.pid, "VmHWM") / 1024

    def rss_mb(self) -> float:
        return _status_kb(self.process.pid, "VmRSS") / 1024


def _status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} for pid {pid}")


@contextmanager
def simulator_process(*flags: str) -> Iterator[Server]:
    """``inferlab-bench simulate --port 0 FLAGS`` in its own process, stopped at the end."""
    cmd = [sys.executable, "-m", "inferlab_bench", "simulate", "--port", "0", *flags]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[-1]
        host, port = url.removeprefix("http://").rsplit(":", 1)
        server = Server(process, host, int(port))
        server.start_mb = server.rss_mb()
        yield server
    finally:
        process.terminate()
        process.wait(timeout=15)


@dataclass
class HealthProbe:
    """GET /health every ``period`` s on its own keep-alive connection, timing each answer."""

    server: Server
    period: float = 0.01
    latencies: list[float] = field(default_factory=list)
    failures: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=30)
        while not self._stop.is_set():
            start = time.perf_counter()
            try:
                conn.request("GET", "/health")
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
            except OSError:
                ok = False
                conn.close()
                conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=30)
            if ok:
                self.latencies.append(time.perf_counter() - start)
            else:
                self.failures += 1
            self._stop.wait(self.period)
        conn.close()

    @property
    def worst_ms(self) -> float:
        return 1000 * max(self.latencies, default=float("nan"))


@contextmanager
def probing(server: Server) -> Iterator[HealthProbe]:
    """A running HealthProbe for the duration of the block."""
    probe = HealthProbe(server)
    thread = threading.Thread(target=probe.run, daemon=True)
    thread.start()
    time.sleep(0.05)  # a few answers before the attack: the connection is open and warm
    try:
        yield probe
    finally:
        time.sleep(0.05)
        probe._stop.set()
        thread.join(timeout=60)


def head(
    path: str,
    *,
    length: int | None = None,
    content_type: str | None = "application/json",
    method: str = "POST",
) -> bytes:
    """A request head; no length means a chunked body."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def exchange(
    server: Server, request_head: bytes, body: Iterable[bytes], timeout: float = 120
) -> Answer:
    """Send a head and a body (pieces), then read the answer; a reset or close is an Answer."""
    with socket.create_connection((server.host, server.port), timeout=timeout) as sock:
        sock.sendall(request_head)
        for piece in body:
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
        return read_answer(sock)


def read_answer(sock: socket.socket) -> Answer:
    response = http.client.HTTPResponse(sock)
    try:
        response.begin()
        return Answer(response.status, response.read())
    except (http.client.RemoteDisconnected, ConnectionResetError, http.client.IncompleteRead):
        return Answer(None)


def json_post(server: Server, body: bytes, path: str = CHAT, **head_args: str | None) -> Answer:
    """One POST of ``body`` with its length declared."""
    return exchange(server, head(path, length=len(body), **head_args), [body])  # type: ignore[arg-type]


def chunked(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """A chunked transfer encoding of ``pieces``."""
    for piece in pieces:
        yield b"%x\r\n" % len(piece) + piece + b"\r\n"
    yield b"0\r\n\r\n"


def filler(total: int, piece: int = MB) -> Iterator[bytes]:
    """``total`` bytes of a JSON-ish string body, ``piece`` at a time (one buffer, reused)."""
    block = b"a" * piece
    sent = 0
    while sent < total:
        yield block[: min(piece, total - sent)]
        sent += piece


def chat(**extra: object) -> bytes:
    body: dict[str, object] = {
        "model": "sim-model",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 4,
        "ignore_eos": True,
    }
    body.update(extra)
    return orjson.dumps(body)


def slow_head(server: Server, gap: float, limit: float) -> Answer:
    """A head dribbled one header line every ``gap`` s: when does the server close it?"""
    with socket.create_connection((server.host, server.port), timeout=limit + 5) as sock:
        start = time.monotonic()
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        while time.monotonic() - start < limit:
            try:
                sock.sendall(b"X-Slow: 1\r\n")
                sock.settimeout(gap)
                if sock.recv(1024) == b"":
                    return Answer(None, closed_after_s=time.monotonic() - start)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                return Answer(None, closed_after_s=time.monotonic() - start)
    return Answer(None)


def silent(server: Server, limit: float) -> Answer:
    """A connection that sends nothing: when is it closed?"""
    with socket.create_connection((server.host, server.port), timeout=limit) as sock:
        start = time.monotonic()
        try:
            if sock.recv(1) == b"":
                return Answer(None, closed_after_s=time.monotonic() - start)
        except TimeoutError:
            pass
    return Answer(None)


def slow_body(server: Server, wait: float) -> Answer:
    """A declared body of which only part comes, then nothing for ``wait`` s."""
    body = chat()
    with socket.create_connection((server.host, server.port), timeout=wait + 30) as sock:
        sock.sendall(head(CHAT, length=len(body)) + body[:10])
        return read_answer(sock)


@dataclass(frozen=True)
class Attack:
    """One hostile request: a name, how to send it, and what a clear answer looks like."""

    name: str
    send: Callable[[Server], Answer]
    status: int | None
    says: str  # a fragment the error message must hold ('' for a closed connection)


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def attacks(body_bytes: int = 100 * MB, n: int = 10**6, bound: int = MB) -> list[Attack]:
    """The hostile clients, each with its expected clear answer; ``bound`` is the server's
    body bound, under which the largest bodies of the other attacks stay."""
    long_text = "hello world " * (bound * 9 // 10 // 12)  # beyond the context (32768)
    ids = list(range(bound // 8))  # about 7 bytes each
    return [
        Attack(
            f"body {body_bytes // MB} MB, length declared",
            lambda s: exchange(s, head(CHAT, length=body_bytes), filler(body_bytes)),
            413,
            "request body too large",
        ),
        Attack(
            f"body {body_bytes // MB} MB, chunked",
            lambda s: exchange(s, head(CHAT), chunked(filler(body_bytes))),
            413,
            "request body too large",
        ),
        Attack(f"n={n}", lambda s: json_post(s, chat(n=n)), 400, "n: at most"),
        Attack(
            "max_tokens=10^18",
            lambda s: json_post(s, chat(max_tokens=10**18)),
            400,
            "maximum context length",
        ),
        Attack(
            "n=128 x max_tokens=32768 x logprobs 20",
            lambda s: json_post(s, chat(n=128, max_tokens=32768, logprobs=True, top_logprobs=20)),
            400,
            "max_answer_tokens",
        ),
        Attack(
            "top_logprobs=10^9",
            lambda s: json_post(s, chat(logprobs=True, top_logprobs=10**9)),
            400,
            "top_logprobs",
        ),
        Attack(
            f"prompt of {len(long_text) // 1000} kB text (beyond the context)",
            lambda s: json_post(s, chat(messages=[{"role": "user", "content": long_text}])),
            400,
            "maximum context length",
        ),
        Attack(
            f"completion prompt of {len(ids) // 1000}k token ids",
            lambda s: json_post(
                s, orjson.dumps({"prompt": ids, "max_tokens": 4}), "/v1/completions"
            ),
            400,
            "maximum context length",
        ),
        Attack(
            f"batch of {bound // 5 // 1000}k prompts",
            lambda s: json_post(
                s, orjson.dumps({"prompt": ["a"] * (bound // 5)}), "/v1/completions"
            ),
            400,
            "prompt (a batch): at most",
        ),
        Attack(
            f"{bound // 32 // 1000}k messages",
            lambda s: json_post(
                s, chat(messages=[{"role": "user", "content": "a"}] * (bound // 32))
            ),
            400,
            "messages: at most",
        ),
        Attack(
            "JSON nested 100k deep", lambda s: json_post(s, deep(100_000)), 400, "not valid JSON"
        ),
        Attack(
            "message field nested 400 deep",
            lambda s: json_post(
                s,
                b'{"messages":[{"role":"user","content":"x","name":'
                + deep(400)
                + b'}],"max_tokens":4}',
            ),
            400,
            "cannot be rendered",
        ),
        Attack(
            "content nested in lists",
            lambda s: json_post(s, chat(messages=[{"role": "user", "content": [[["x"]]]}])),
            400,
            "messages[0].content",
        ),
        Attack(
            "bad UTF-8",
            lambda s: json_post(s, b'{"messages":[{"role":"user","content":"\xff\xfe"}]}'),
            400,
            "not valid JSON",
        ),
        Attack(
            "Content-Type text/plain",
            lambda s: json_post(s, chat(), content_type="text/plain"),
            415,
            "Content-Type must be application/json",
        ),
        Attack(
            "form-encoded (curl -d)",
            lambda s: json_post(s, chat(), content_type="application/x-www-form-urlencoded"),
            415,
            "Content-Type must be application/json",
        ),
        Attack(
            f"/tokenize of a {len(long_text) // 1000} kB prompt",
            lambda s: json_post(s, orjson.dumps({"prompt": long_text}), "/tokenize"),
            400,
            "more than max_model_len",
        ),
        Attack(
            f"/detokenize of {len(ids) // 1000}k ids",
            lambda s: json_post(s, orjson.dumps({"tokens": ids}), "/detokenize"),
            400,
            "at most max_model_len",
        ),
    ]

"""Start llama-server on 127.0.0.1 with a free port; wait until /health answers 200."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

START_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class RunningLlamaServer:
    base_url: str
    model_path: Path
    log_path: Path
    args: tuple[str, ...]

    @property
    def model_id(self) -> str:
        """What the server lists in /v1/models (and accepts as ``model``): the -m path."""
        return str(self.model_path)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def running_llama_server(
    binary: Path,
    model: Path,
    log_path: Path,
    *,
    parallel: int = 2,
    cache_ram_mib: int | None = 0,
    extra: Sequence[str] = (),
) -> Iterator[RunningLlamaServer]:
    """One server process for the block; killed (and waited for) afterwards."""
    port = free_port()
    args = [
        "-m",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--parallel",
        str(parallel),
        "--metrics",
        "-c",
        "4096",
        "--threads",
        "1",
    ]
    if cache_ram_mib is not None:
        args += ["--cache-ram", str(cache_ram_mib)]
    args += list(extra)
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(binary), *args], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            base_url = f"http://127.0.0.1:{port}"
            _wait_healthy(base_url, process, log_path)
            yield RunningLlamaServer(base_url, model, log_path, tuple(args))
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def _wait_healthy(base_url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"llama-server exited with {process.returncode}:\n{tail}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base_url}/health", timeout=1.0).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(
        f"llama-server not healthy after {START_TIMEOUT_SECONDS:.0f} s; see {log_path}"
    )

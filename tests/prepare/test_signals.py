"""A signal during a download ends preparation with a failed result and leaves no part file."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferlab_bench.atomic import remove_stale_parts
from inferlab_bench.protocol import BenchDatasetPreparationResult, ClientStatus
from tests.prepare.conftest import prep_request, write_catalog

SHA = "ab" * 32


@pytest.fixture
def dribbling_server() -> Iterator[str]:
    """Declares a large body, sends a little of it, then holds the connection open."""
    release = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Length", str(10**9))
            self.end_headers()
            self.wfile.write(b"[" + b" " * 4096)
            self.wfile.flush()
            release.wait(60)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/sharegpt.json"
    release.set()
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_mid_download_gives_a_failed_result_and_no_part(
    dribbling_server: str, tmp_path: Path, sig: int
) -> None:
    catalog = write_catalog(tmp_path / "catalog", SHA, dribbling_server)
    request = prep_request(tmp_path / "absent.json", catalog, tmp_path / "out")
    (tmp_path / "request.json").write_text(request.model_dump_json())
    cache = tmp_path / "xdg"
    command = [sys.executable, "-m", "inferlab_bench", "prepare"]
    command += [
        "--input",
        str(tmp_path / "request.json"),
        "--output",
        str(tmp_path / "result.json"),
    ]
    command += ["--catalog-dir", str(catalog)]
    process = subprocess.Popen(
        command,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
        stderr=subprocess.PIPE,
        text=True,
    )
    parts = cache / "inferlab" / "datasets" / "sha256"
    deadline = time.monotonic() + 60
    while not list(parts.glob("*.part")):
        assert process.poll() is None and time.monotonic() < deadline, "no download started"
        time.sleep(0.05)
    process.send_signal(sig)
    _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    result = BenchDatasetPreparationResult.model_validate_json(
        (tmp_path / "result.json").read_bytes()
    )
    assert result.status is ClientStatus.FAILED
    name = signal.Signals(sig).name
    assert f"preparation interrupted by a signal ({name})" in (result.error or "")
    assert list(parts.iterdir()) == []  # no part left, nothing under the final name


def test_parts_of_dead_downloads_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    final = tmp_path / SHA
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".{SHA}.{dead.pid}.x1y2.part"
    live = tmp_path / f".{SHA}.{os.getpid()}.z3.part"
    foreign = tmp_path / f".{SHA}.abcdefgh.part"  # an older name without an owner: kept
    for path in (stale, live, foreign):
        path.write_bytes(b"x")
    assert remove_stale_parts(final) == [stale]
    assert not stale.exists() and live.exists() and foreign.exists()

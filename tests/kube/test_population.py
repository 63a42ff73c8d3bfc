"""The init container's sha256 check, run here exactly as the pods run it."""

from __future__ import annotations

import hashlib
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferlab_bench.errors import ConfigurationError
from inferlab_bench.kube.population import (
    CHECK_SCRIPT,
    PvcDelivery,
    UrlDelivery,
    pod_population,
)

DATA = b'{"session_id": "inferlab-00000000"}\n' * 1000
SHA = hashlib.sha256(DATA).hexdigest()


def check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHECK_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def env_of(delivery: UrlDelivery | PvcDelivery, sha256: str, root: Path) -> dict[str, str]:
    (init,) = pod_population(delivery, sha256, "image").init_containers
    env = {e["name"]: e["value"] for e in init["env"]}
    # The pod's mount dir, re-rooted under tmp.
    env["INFERLAB_POPULATION_PATH"] = str(root / Path(env["INFERLAB_POPULATION_PATH"]).name)
    return env


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "served").mkdir()
    (tmp_path / "served" / "population.jsonl").write_bytes(DATA)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(tmp_path / "served"), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/population.jsonl"
    finally:
        server.shutdown()


def test_a_file_on_the_claim_with_the_right_digest_passes(tmp_path: Path) -> None:
    (tmp_path / "population.jsonl").write_bytes(DATA)
    done = check(env_of(PvcDelivery("pops"), SHA, tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"sha256 {SHA} verified" in done.stdout


def test_a_different_file_stops_the_pod_with_both_digests(tmp_path: Path) -> None:
    other = DATA + b"\n"
    (tmp_path / "population.jsonl").write_bytes(other)
    done = check(env_of(PvcDelivery("pops"), SHA, tmp_path))
    assert done.returncode == 1
    assert f"expected {SHA}, got {hashlib.sha256(other).hexdigest()}" in done.stderr


def test_the_url_is_fetched_then_checked(tmp_path: Path, served: str) -> None:
    (tmp_path / "pod").mkdir()
    done = check(env_of(UrlDelivery(served), SHA, tmp_path / "pod"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pod" / "population.jsonl").read_bytes() == DATA
    wrong = check(env_of(UrlDelivery(served), "0" * 64, tmp_path / "pod"))
    assert wrong.returncode == 1 and "sha256 mismatch" in wrong.stderr


def test_a_failed_download_stops_the_pod(tmp_path: Path, served: str) -> None:
    done = check(env_of(UrlDelivery(served.replace("population", "missing")), SHA, tmp_path))
    assert done.returncode != 0
    assert "404" in done.stderr


def test_a_bad_digest_is_refused_before_anything_is_generated() -> None:
    with pytest.raises(ConfigurationError, match="64 lower-case hex digits"):
        pod_population(PvcDelivery("pops"), "ABC", "image")

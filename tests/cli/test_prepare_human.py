"""Human-mode prepare and the dataset command, as a person runs them."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inferlab_bench.runs.prepare import DEMO_SAMPLE
from tests.case.support import TOKENIZER_DIR
from tests.prepare.conftest import FileServer, write_catalog


def cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inferlab_bench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def test_prepare_with_flags_on_a_local_file(tmp_path: Path) -> None:
    out = tmp_path / "pop"
    proc = cli(
        "prepare",
        "--model",
        TOKENIZER_DIR,
        "--dataset",
        DEMO_SAMPLE,
        "--entries",
        "12",
        "--max-input-tokens",
        "512",
        "--output-tokens",
        "16",
        "--seed",
        "3",
        "--out",
        out,
        env={"XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert proc.returncode == 0, proc.stderr
    assert "population:" in proc.stdout and "12 entries" in proc.stdout
    lines = (out / "population.jsonl").read_text().splitlines()
    assert len(lines) == 12 and all(json.loads(line)["output_length"] == 16 for line in lines)
    request = json.loads((out / "prepare-request.json").read_text())
    assert (
        request["request_source"]["catalog"]["sha256"]
        == hashlib.sha256(DEMO_SAMPLE.read_bytes()).hexdigest()
    )
    assert json.loads((out / "prepare-result.json").read_text())["status"] == "succeeded"


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["--dataset", "/no/such.json"], "--dataset: expected an existing file", 2),
        (["--entries", "100000"], "100000 needed", 1),
        ([], "", 0),
    ],
)
def test_prepare_flag_errors(args: list[str], message: str, code: int, tmp_path: Path) -> None:
    base = {
        "--model": TOKENIZER_DIR,
        "--dataset": str(DEMO_SAMPLE),
        "--entries": "2",
        "--max-input-tokens": "256",
        "--out": str(tmp_path / "o"),
    }
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    proc = cli(
        "prepare",
        *[x for pair in base.items() for x in pair],
        env={"XDG_CACHE_HOME": str(tmp_path)},
    )
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_prepare_without_mode_is_a_usage_error() -> None:
    proc = cli("prepare", "--entries", "2")
    assert proc.returncode == 2
    assert "give --model, --dataset, --max-input-tokens, --out (or --input)" in proc.stderr


def test_dataset_fetch_verify_path(tmp_path: Path) -> None:
    body = DEMO_SAMPLE.read_bytes()
    sha = hashlib.sha256(body).hexdigest()
    server = FileServer(body)
    try:
        catalog = write_catalog(tmp_path / "catalog", sha, server.url)
        env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
        where = cli("dataset", "path", "sharegpt", "--catalog-dir", catalog, env=env)
        assert where.stdout.strip() == str(
            tmp_path / "cache" / "inferlab" / "datasets" / "sha256" / sha
        )
        absent = cli("dataset", "verify", "sharegpt", "--catalog-dir", catalog, env=env)
        assert absent.returncode == 1 and "not present" in absent.stderr
        fetched = cli("dataset", "fetch", "sharegpt", "--catalog-dir", catalog, env=env)
        assert fetched.returncode == 0, fetched.stderr
        assert "download" in fetched.stdout and server.hits == 1
        assert Path(where.stdout.strip()).read_bytes() == body
        ok = cli("dataset", "verify", "sharegpt", "--catalog-dir", catalog, env=env)
        assert ok.returncode == 0 and "OK" in ok.stdout
    finally:
        server.stop()
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"[]")
    mismatch = cli("dataset", "verify", bad, "--catalog-dir", catalog)
    assert mismatch.returncode == 1 and "sha256 mismatch" in mismatch.stderr

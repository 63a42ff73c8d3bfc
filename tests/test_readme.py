"""The README runs as written: every command block of README.md and docs/run.md, in order.

Only the tokenizer and dataset paths are replaced (``TOKENIZER_DIR``, ``DATASET``), and the
simulator's port 8000 by a free one (a fixed port is not ours to take on a shared machine).
A block that cannot run here says why in a ``<!-- readme-test: not run (...) -->`` line just
above it; every other block is run, each command must exit 0 and leave the files it says it
writes.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.case.support import TOKENIZER_DIR

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = (ROOT / "README.md", ROOT / "docs" / "run.md")
DATASET = ROOT / "inferlab_bench" / "runs" / "sharegpt-demo-sample.json"
NOT_RUN = re.compile(r"<!-- readme-test: not run \((.+)\) -->")
PORT = "8000"


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its text, and why it is not run (None: it is run)."""

    where: str
    text: str
    not_run: str | None

    def commands(self) -> list[list[str]]:
        """Each command as words: continuation lines joined, comments dropped."""
        joined = self.text.replace("\\\n", " ")
        return [words for line in joined.splitlines() if (words := shlex.split(line, True))]

    @property
    def is_commands(self) -> bool:
        """A block of commands (not a table, a tree or a transcript of output)."""
        first = next((line.split()[0] for line in self.text.splitlines() if line.strip()), "")
        return first in ("inferlab-bench", "pip", "python3", "$")


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found, index = [], 0
    while index < len(lines):
        if not lines[index].startswith("```"):
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        mark = NOT_RUN.fullmatch(lines[index - 1].strip()) if index else None
        where = f"{path.relative_to(ROOT)}:{index + 1}"
        found.append(Block(where, "\n".join(lines[index + 1 : end]), mark and mark.group(1)))
        index = end + 1
    return found


def command_blocks() -> list[Block]:
    return [b for path in DOCUMENTS for b in blocks(path) if b.is_commands]


def test_every_block_not_run_says_why_and_every_other_is_ours_to_run() -> None:
    """What the README test skips is marked in the README, and only that."""
    run = [b for b in command_blocks() if b.not_run is None]
    assert len(run) >= 4, [b.where for b in run]
    for block in run:
        for words in block.commands():
            assert words[0] == "inferlab-bench", (block.where, words)
            assert "..." not in words and not any(w.startswith("[") for w in words), words
    skipped = [b for b in command_blocks() if b.not_run is not None]
    assert {b.where.split(":")[0] for b in skipped} == {"README.md", "docs/run.md"}


def test_the_readme_sizes_agree_with_each_other() -> None:
    """A population holds --requests + --warmup of every command that reads it; a capacity
    range tops out at --requests (the rules `run`, `sweep` and `capacity` check)."""
    entries: dict[str, int] = {}
    for block in command_blocks():
        for words in block.commands():
            flags = _flags(words)
            if words[1] == "prepare" and "--entries" in flags:
                entries[flags["--out"].rstrip("/")] = int(flags["--entries"])
            if "--population" in flags:
                folder = str(Path(flags["--population"]).parent)
                needed = int(flags["--requests"]) + int(flags.get("--warmup", "0"))
                assert needed <= entries[folder], (block.where, words)
            if "--concurrency-range" in flags:
                top = int(flags["--concurrency-range"].split(":")[1])
                assert top <= int(flags["--requests"]), (block.where, words)


def _flags(words: list[str]) -> dict[str, str]:
    return {
        word: value
        for word, value in zip(words, [*words[1:], ""], strict=True)
        if word.startswith("--")
    }


def _free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def substituted(words: list[str], port: str) -> list[str]:
    """The paths a reader has to supply, and the port this machine has free."""
    out = []
    for word in words:
        word = word.replace("TOKENIZER_DIR", TOKENIZER_DIR).replace("DATASET", str(DATASET))
        word = word.replace(f"127.0.0.1:{PORT}", f"127.0.0.1:{port}")
        out.append(port if word == PORT and out and out[-1] == "--port" else word)
    return out


def expected_files(words: list[str]) -> list[str]:
    """The files a command says it writes (README and docs/run.md), as globs under cwd."""
    command, flags = words[1], _flags(words)
    out = flags.get("--out", "").rstrip("/")
    per_case = ("request.json", "result.json", "records.parquet", "validity.json")
    if command == "demo":
        return ["inferlab-demo/sweep/sweep.json", "inferlab-demo/sweep/*/records.parquet"]
    if command == "prepare" and out:
        return [
            f"{out}/{name}"
            for name in (
                "population.jsonl",
                "population-evidence.jsonl",
                "population.sha256",
                "preparation-manifest.json",
            )
        ]
    if command == "run":
        return [f"{out}/{name}" for name in per_case] + [f"{out}/plots/*.png"]
    if command == "sweep":
        return [f"{out}/sweep.json", f"{out}/plots/sweep.png"] + [
            f"{out}/*/{name}" for name in per_case
        ]
    if command == "capacity":
        return [f"{out}/capacity.json"]
    if command == "reproduce":
        return [f"{out}/reproduction.json"]
    written = [flags[f] for f in ("--html", "--output") if f in flags]
    return written + ([out] if out else [])


@pytest.fixture
def servers() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for server in started:
        server.terminate()
        server.wait(timeout=30)


def _start(words: list[str], cwd: Path) -> subprocess.Popen[str]:
    """A command ending in ``&``: started, and waited for until it says it serves."""
    server = subprocess.Popen(
        [sys.executable, "-m", "inferlab_bench", *words[1:]],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    assert "serving" in line, (words, line)
    return server


@pytest.mark.slow
@pytest.mark.timeout(3600)  # about 15 commands, a dozen AIPerf runs, on 2 shared cores
def test_the_readme_runs_as_written(tmp_path: Path, servers: list[subprocess.Popen[str]]) -> None:
    port = _free_port()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    ran = 0
    for block in command_blocks():
        if block.not_run is not None:
            continue
        for raw in block.commands():
            words = substituted(raw, port)
            if words[-1] == "&":
                servers.append(_start(words[:-1], tmp_path))
                continue
            started = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "inferlab_bench", *words[1:]],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
                stdin=subprocess.DEVNULL,
            )
            said = f"{block.where}: {shlex.join(raw)}\n{proc.stderr[-3000:]}"
            assert proc.returncode == 0, said
            for pattern in expected_files(words):
                assert list(tmp_path.glob(pattern)), f"{pattern} missing after {said}"
            ran += 1
            print(f"{time.monotonic() - started:6.1f} s  {shlex.join(raw)[:100]}")
    assert ran >= 12

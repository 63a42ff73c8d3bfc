"""The installed command (``cli.entry``): the command's exit code and its whole output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=ENV, timeout=120
    )


def test_the_command_exits_with_its_code_and_whole_output() -> None:
    done = _python("-m", "inferlab_bench", "handshake")
    assert done.returncode == 0
    assert json.loads(done.stdout)["protocol_version"] == "6"  # flushed, whole
    done = _python("-m", "inferlab_bench", "prepare", "--entries", "5")
    assert done.returncode == 2
    assert "give --model" in done.stderr

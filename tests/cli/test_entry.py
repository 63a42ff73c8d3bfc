"""The installed command (``cli.entry``): the command's exit code, its output flushed, every
exit handler run, and no interpreter teardown after them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=ENV, timeout=120
    )


def test_output_and_exit_code_survive_the_quick_exit() -> None:
    done = _python("-m", "inferlab_bench", "handshake")
    assert done.returncode == 0
    assert json.loads(done.stdout)["protocol_version"] == "6"  # flushed, whole
    done = _python("-m", "inferlab_bench", "prepare", "--entries", "5")
    assert done.returncode == 2
    assert "give --model" in done.stderr


_PROBE = textwrap.dedent(
    """
    import atexit, sys
    from inferlab_bench import cli

    class Torn:
        def __del__(self):
            print("torn down", flush=True)

    KEEP = Torn()  # a module global: only the interpreter's teardown deletes it

    def command(argv=None):
        atexit.register(lambda: print("exit handler ran", flush=True))
        print("partial line without a newline", end="")  # left in the buffer
        return int(sys.argv[1])

    cli.main = command
    raise SystemExit(cli.entry())
    """
)


def test_exit_handlers_run_and_teardown_is_skipped() -> None:
    done = _python("-c", _PROBE, "3")
    assert done.returncode == 3
    assert "exit handler ran" in done.stdout
    assert "partial line without a newline" in done.stdout
    assert "torn down" not in done.stdout
    normal = _python("-c", _PROBE.replace("cli.entry()", "cli.main()"), "0")
    assert normal.returncode == 0 and "torn down" in normal.stdout  # what the probe detects

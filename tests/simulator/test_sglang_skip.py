"""The SGLang client tests, when they skip, name the import that is really missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
# Runs the SGLang tests with one module made unimportable, as in an environment without it.
HIDE_AND_RUN = """
import sys, pytest
sys.modules[{module!r}] = None
sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", {path!r}]))
"""


def _skip_lines(module: str) -> str:
    code = HIDE_AND_RUN.format(module=module, path="tests/simulator/test_sglang_client.py")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=100
    )
    assert done.returncode in (0, 5), done.stdout + done.stderr  # 5: every test skipped
    return "\n".join(line for line in done.stdout.splitlines() if "SKIPPED" in line)


def test_a_missing_ipython_is_named() -> None:
    skipped = _skip_lines("IPython")
    assert "needs 'IPython'" in skipped and "ipython==8.12.3" in skipped
    assert "not installed: pip" not in skipped  # not the command the user just ran


def test_a_missing_sglang_says_to_install_it() -> None:
    skipped = _skip_lines("sglang")
    assert "SGLang's client is not installed" in skipped and "sglang==0.5.9" in skipped

"""Gzip bombs: ``bundle --verify`` refuses each with one line and a bounded peak memory.

Each bomb runs ``inferlab-bench bundle --verify`` as its own process; its peak resident set
size is the kernel's VmHWM of that process. The bound is 200 MB, the issue's; the command itself
(Python, pydantic, pyarrow imported) measured 104 MB on refusal, 114 MB for the ratio cap
(whose 8 MB of expanded bytes are read before it judges).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability import bundles as b
from tests.reliability.targets import fingerprint

PEAK_RSS_BOUND_KB = 200 * 1024
GIB = 1024**3
MIB = 1024**2

BOMBS = {
    # 2 MB on disk, 2 GiB expanded: the bomb (2.2 GB of memory before the fix)
    "two-gib-listed": (dict(size=2 * GIB, name="run/bomb.bin"), "less than or equal to"),
    # under every size cap, only the expansion ratio gives it away
    "ratio-only": (dict(size=500 * MIB, name="run/bomb.bin"), "refused as a gzip bomb"),
    # the index lists 10 bytes, the header claims 500 MiB
    "header-lies": (
        dict(size=500 * MIB, name="run/bomb.bin", listed_size=10),
        "BUNDLE.json says 10",
    ),
    # BUNDLE.json itself is the bomb
    "index-bomb": (dict(size=0, name="x", index_size=2 * GIB), "more than a bundle member may be"),
}


PEAK_PROBE = """
import atexit, sys
from pathlib import Path

def peak():
    status = Path("/proc/self/status").read_text().splitlines()
    Path(sys.argv[1]).write_text(next(l for l in status if l.startswith("VmHWM:")).split()[1])

atexit.register(peak)
from inferlab_bench.cli import main
sys.exit(main(sys.argv[2:]))
"""
"""Runs the command and writes its peak RSS (VmHWM, kB) at exit. VmHWM belongs to the
process's own memory since exec, unlike ``ru_maxrss``, which keeps the parent's peak from
before the exec of a forked child."""


def _verify(bundle: Path, peak_path: Path) -> tuple[int, str, int]:
    """(exit code, stderr, peak RSS in kB) of ``bundle --verify`` in its own process."""
    proc = subprocess.run(
        [sys.executable, "-c", PEAK_PROBE, str(peak_path), "bundle", "--verify", str(bundle)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode, proc.stderr, int(peak_path.read_text())


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_a_gzip_bomb_is_refused_within_bounded_memory(bomb: str, tmp_path: Path) -> None:
    spec, said = BOMBS[bomb]
    crafted = b.zeros_gzip(tmp_path / "bomb.tar.gz", **spec)  # type: ignore[arg-type]
    assert crafted.stat().st_size < 3 * MIB
    peak = tmp_path.parent / f"{tmp_path.name}-peak.txt"
    before = fingerprint(tmp_path)
    code, err, peak_kb = _verify(crafted, peak)
    assert code == 1 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and said in err, err
    assert peak_kb < PEAK_RSS_BOUND_KB, f"peak RSS {peak_kb} kB"
    assert fingerprint(tmp_path) == before

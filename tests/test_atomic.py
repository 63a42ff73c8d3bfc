"""What we publish gets the mode the user's umask gives any new file, written atomically."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from inferlab_bench import atomic
from inferlab_bench.report.plots import latency_cdfs


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    before = os.umask(0o022)
    os.umask(before)
    yield lambda mask: os.umask(mask) and None
    os.umask(before)


def _write_text(path: Path) -> None:
    with atomic.fresh_text_file(path) as handle:
        handle.write("line\n")


def _plot(path: Path) -> None:
    latency_cdfs({"c=1": {"ttft_ms": np.arange(1.0, 9.0)}}, path)


WRITERS: dict[str, Callable[[Path], None]] = {
    "bytes": lambda path: atomic.write_bytes_atomic(path, b"{}\n"),
    "live log": _write_text,
    "plot": _plot,
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_mode_follows_the_umask(
    writer: str, mask: int, mode: int, tmp_path: Path, umask: Callable[[int], None]
) -> None:
    umask(mask)
    target = tmp_path / "out" / "file"
    WRITERS[writer](target)
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert [p.name for p in target.parent.iterdir()] == ["file"]  # no temp file left


def test_replacing_a_private_file_takes_the_umask_mode(
    tmp_path: Path, umask: Callable[[int], None]
) -> None:
    umask(0o022)
    target = tmp_path / "result.json"
    target.write_bytes(b"old")
    target.chmod(0o600)
    atomic.write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_stop_the_instant_after_the_temp_file_is_created_leaves_none(
    writer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal raised as an exception can land between the call that creates the temp file
    and the line that learns its name; the name is known before, so it is still removed."""
    real_open = os.open

    def open_then_stop(path: str, flags: int, mode: int = 0o777) -> int:
        fd = real_open(path, flags, mode)
        if not str(path).endswith(".part"):
            return fd
        os.close(fd)
        raise KeyboardInterrupt  # what interrupts.guard's handler raises from a signal

    monkeypatch.setattr(atomic.os, "open", open_then_stop)
    target = tmp_path / "out" / "file"
    with pytest.raises(KeyboardInterrupt):
        WRITERS[writer](target)
    assert list(target.parent.iterdir()) == []

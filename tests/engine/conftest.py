"""Fixtures for the engine tests: a cached llama-server build, the tiny GGUF, a running server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from inferlab_bench.runs.demo import TOKENIZER_DIR
from tests.engine import llama_build
from tests.engine.gguf_model import write_tiny_qwen2
from tests.engine.server import RunningLlamaServer, running_llama_server

StartServer = Callable[..., RunningLlamaServer]
_ENGINE_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Until the binary is cached, the first engine test pays the build (5-12 min on 2 cores)."""
    if (llama_build.cache_dir() / "llama-server").is_file():
        return
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(_ENGINE_DIR):
            item.add_marker(pytest.mark.timeout(llama_build.BUILD_TIMEOUT_SECONDS + 300))


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    try:
        found = llama_build.find_or_build()
    except llama_build.BuildUnavailable as exc:
        pytest.skip(str(exc))
    return found.path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Qwen3's tokenizer, no BOS: the server's prompt count equals the template's."""
    return write_tiny_qwen2(
        tmp_path_factory.mktemp("gguf") / "tiny-qwen3.gguf", Path(TOKENIZER_DIR)
    )


@pytest.fixture(scope="session")
def tiny_model_bos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same model with ``add_bos_token = true``: the server counts one more token."""
    path = tmp_path_factory.mktemp("gguf-bos") / "tiny-qwen3-bos.gguf"
    return write_tiny_qwen2(path, Path(TOKENIZER_DIR), add_bos=True)


@pytest.fixture
def start_server(
    llama_server_binary: Path, tiny_model: Path, tmp_path: Path
) -> Iterator[StartServer]:
    """``start_server(model=..., parallel=..., cache_ram_mib=...)``; all stopped at teardown."""
    with ExitStack() as stack:
        count = 0

        def start(**overrides: Any) -> RunningLlamaServer:
            nonlocal count
            count += 1
            model = overrides.pop("model", tiny_model)
            log = tmp_path / f"llama-server-{count}.log"
            return stack.enter_context(
                running_llama_server(llama_server_binary, model, log, **overrides)
            )

        yield start

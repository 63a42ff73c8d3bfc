"""The one tokenizer loader: local directories only, with errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferlab_bench.case.stage import run_case
from inferlab_bench.errors import TokenizerError
from inferlab_bench.protocol import ClientStatus
from inferlab_bench.tokenizer import load_tokenizer, tokenizer_dir
from tests.case.support import TOKENIZER_DIR, make_request


def test_a_local_directory_loads() -> None:
    tokenizer = load_tokenizer(TOKENIZER_DIR)
    assert tokenizer.encode("hello") == load_tokenizer(TOKENIZER_DIR).encode("hello")


@pytest.mark.parametrize(
    ("locator", "message"),
    [
        ("", "model.locator: expected a local tokenizer directory, found ''"),
        ("  ", "model.locator: expected a local tokenizer directory"),
        ("a\0b", "model.locator: expected a local tokenizer directory"),
        ("Qwen/Qwen2-0.5B", "model.locator Qwen/Qwen2-0.5B: not a local directory"),
    ],
)
def test_anything_but_a_local_directory_is_refused(locator: str, message: str) -> None:
    with pytest.raises(TokenizerError, match=message.replace("/", "/")):
        tokenizer_dir(locator)


def test_a_directory_without_tokenizer_files_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match=f"tokenizer {tmp_path}: cannot load a tokenizer"):
        load_tokenizer(str(tmp_path), field="tokenizer")


def test_an_empty_locator_fails_the_case_before_aiperf_starts(tmp_path: Path) -> None:
    request = make_request(port=9, artifact_dir=tmp_path / "case")
    request = request.model_copy(update={"model": request.model.model_copy(update={"locator": ""})})
    result = run_case(request)
    assert result.status is ClientStatus.FAILED
    assert "model.locator: expected a local tokenizer directory" in (result.error or "")
    assert result.native_command == []

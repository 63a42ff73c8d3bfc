"""The one place a tokenizer is loaded: a local directory, through AutoTokenizer, never online."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inferlab_bench.errors import TokenizerError


def tokenizer_dir(locator: str, *, field: str = "model.locator") -> Path:
    """The local directory ``locator`` names; anything else (a hub id, an empty string,
    which would mean the current directory) is refused naming ``field``."""
    if not locator.strip() or "\0" in locator:
        raise TokenizerError(
            f"{field}: expected a local tokenizer directory, found {locator!r}",
            hint="give the directory holding tokenizer.json and tokenizer_config.json",
        )
    path = Path(locator)
    if not path.is_dir():
        raise TokenizerError(
            f"{field} {locator}: not a local directory (nothing is fetched from a model hub)",
            hint="download the tokenizer files once and give their directory",
        )
    return path


def load_tokenizer(locator: str, *, field: str = "model.locator") -> Any:
    """The tokenizer in the local directory ``locator``, with only local files."""
    path = tokenizer_dir(locator, field=field)
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:  # transformers raises OSError, ValueError, ... for bad files
        raise TokenizerError(
            f"{field} {locator}: cannot load a tokenizer from its files ({exc})",
            hint="point it at a directory with tokenizer.json / tokenizer_config.json",
        ) from exc

"""The one place a tokenizer is loaded: a local directory, through AutoTokenizer, never online.

AutoTokenizer may rebuild the backend that ``tokenizer.json`` describes (transformers 5 does
for Qwen2: other ByteLevel flags), so a shortcut that reads ``tokenizer.json`` with the
tokenizers library alone would not be the same tokenizer. What may skip transformers is
the backend AutoTokenizer built, serialized by the tokenizers library itself
(``save_backend``) and read back (``load_backend``): the same normalizer, pre-tokenizer,
model and added tokens, so the same ids for every text
(``tests/prepare/tokens/test_store.py`` compares them with AutoTokenizer's on real ShareGPT
and adversarial text for every tokenizer the preparation tests use).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeGuard

from inferlab_bench.atomic import write_bytes_atomic
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


def save_backend(tok: Any, path: Path) -> bool:
    """Write ``tok``'s fast backend, as the tokenizers library serializes it, to ``path``
    (atomically); False when it has none.

    A BPE model's merges are written in the library's older form, one ``"left right"``
    string each, when no token of a merge holds a space (the byte-level vocabularies write
    a space as another character): the library reads that form back into the same model
    (the same serialization, checked here before writing), about a fifth faster than pairs,
    and reading it is the longest step of a warm preparation's helper."""
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        return False
    serialized = backend.to_str()
    write_bytes_atomic(path, _with_merges_as_strings(serialized, type(backend)))
    return True


def _with_merges_as_strings(serialized: str, tokenizer_type: Any) -> bytes:
    """``serialized`` with its BPE merges as strings, when that reads back the same."""
    import orjson

    spec = orjson.loads(serialized)
    model = spec.get("model") if isinstance(spec, dict) else None
    if not isinstance(model, dict) or not _spaceless_pairs(merges := model.get("merges")):
        return serialized.encode()
    model["merges"] = [f"{left} {right}" for left, right in merges]
    shorter = orjson.dumps(spec)
    same = tokenizer_type.from_str(shorter.decode()).to_str() == serialized
    return shorter if same else serialized.encode()


def load_backend(path: Path) -> Any | None:
    """The backend ``save_backend`` wrote, without transformers; None if it is absent or
    unreadable (the caller then loads the tokenizer through AutoTokenizer)."""
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception:  # a missing, cut or foreign file: the exact path will load it
        return None


def _spaceless_pairs(merges: Any) -> TypeGuard[list[list[str]]]:
    """Whether ``merges`` is a non-empty list of [left, right] strings without spaces."""
    return (
        isinstance(merges, list)
        and bool(merges)
        and all(
            isinstance(m, list)
            and len(m) == 2
            and all(isinstance(t, str) and " " not in t for t in m)
            for m in merges
        )
    )


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading token ids ``a`` and ``b`` share."""
    length = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        length += 1
    return length

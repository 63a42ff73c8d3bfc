"""Helpers of the publish tests: a small frozen population made by the real preparation stage."""

from __future__ import annotations

from pathlib import Path

from inferlab_bench.protocol import ClientStatus
from inferlab_bench.runs.prepare import (
    DEMO_SAMPLE,
    local_file,
    preparation_request,
    prepare_and_save,
)
from tests.case.support import TOKENIZER_DIR

__all__ = ["DEMO_SAMPLE", "prepare_population"]


def prepare_population(out: Path, *, seed: int, entries: int = 16) -> Path:
    """``population.jsonl`` of ``entries`` demo-sample conversations (16-token outputs)."""
    choice = local_file(DEMO_SAMPLE, out / "catalog")
    request = preparation_request(
        choice,
        TOKENIZER_DIR,
        "sim",
        required=entries,
        max_input_tokens=512,
        output_tokens=16,
        seed=seed,
        out=out,
    )
    result = prepare_and_save(request, choice)
    assert result.status is ClientStatus.SUCCEEDED and result.population is not None, result.error
    return Path(result.population.path)

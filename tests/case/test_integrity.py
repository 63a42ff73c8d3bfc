"""Case integrity: population identity, warmup completeness; the prompts' shared prefixes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from inferlab_bench.case.integrity import check_population_identity, check_warmup_complete
from inferlab_bench.case.prefix import prefix_bounds, prompt_token_ids
from inferlab_bench.case.records import CaseRecords, read_records
from inferlab_bench.errors import RecordsError
from inferlab_bench.tokenizer import common_prefix_length
from tests.case.support import TOKENIZER_DIR, prompt_tokens, record, write_records


def load(tmp_path: Path, rows: list[dict]) -> CaseRecords:
    return read_records(write_records(tmp_path / "r.jsonl", rows))


def test_identity_accepts_the_expected_slices_in_any_order(tmp_path: Path) -> None:
    rows = [record(1, phase="warmup"), record(0, phase="warmup"), record(3), record(2)]
    check_population_identity(load(tmp_path, rows), warmup=2, request_count=2)


def test_identity_names_missing_repeated_and_unexpected_entries(tmp_path: Path) -> None:
    rows = [
        record(0, phase="warmup"),
        record(1, session=5),
        record(1, session=6),
        record(9, session=7),
    ]
    with pytest.raises(
        RecordsError,
        match=r"profiling: .*inferlab-00000001\.\.inferlab-00000003.*"
        r"missing inferlab-00000002, inferlab-00000003; unexpected inferlab-00000009; "
        r"repeated inferlab-00000001",
    ):
        check_population_identity(load(tmp_path, rows), warmup=1, request_count=3)


def test_warmup_must_complete_without_errors(tmp_path: Path) -> None:
    records = load(
        tmp_path,
        [record(0, phase="warmup"), record(1, phase="warmup", error="HTTP 500", good=None)],
    )
    with pytest.raises(RecordsError, match=r"warmup: 1 of 2 requests failed \(first: HTTP 500\)"):
        check_warmup_complete(records.warmup, 2)
    with pytest.raises(RecordsError, match="expected 3 records"):
        check_warmup_complete(records.warmup, 3)


def test_prefix_bounds_are_the_longest_prefix_shared_with_an_earlier_prompt() -> None:
    assert common_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2
    assert prefix_bounds([[1, 2, 3], [1, 2, 4], [9], [1, 2, 4, 7]]) == [0, 2, 0, 3]
    assert prefix_bounds([]) == []


def test_prefix_bounds_equal_the_longest_match_over_all_earlier_prompts() -> None:
    rng = random.Random(3)
    for _ in range(500):
        prompts = [[rng.randrange(3) for _ in range(rng.randrange(6))] for _ in range(9)]
        every_earlier = [
            max((common_prefix_length(p, prompts[j]) for j in range(k)), default=0)
            for k, p in enumerate(prompts)
        ]
        assert prefix_bounds(prompts) == every_earlier, prompts


def test_prompt_token_ids_use_the_real_chat_template() -> None:
    messages = [
        [{"role": "user", "content": "Entry 1: cats."}],
        [{"role": "user", "content": "Entry 2: trains."}],
    ]
    a, b = prompt_token_ids(TOKENIZER_DIR, messages, {})
    assert a != b and prompt_tokens(messages[0]) == len(a)
    shared = prefix_bounds([a, b])[1]
    # Both open with the template's "<|im_start|>user\n" and "Entry", and differ after it.
    assert 4 <= shared < len(a) and a[:shared] == b[:shared] and a[shared] != b[shared]

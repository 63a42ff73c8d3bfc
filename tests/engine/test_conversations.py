"""A conversation case against llama.cpp: a later turn reads its history from the slot.

llama-server keeps each slot's last prompt and output; a session's next turn resends that
prompt (and the dataset's reply, not the server's), so the slot serves exactly the tokens
the turn shares with the previous prompt: ``timings.cache_n``, reported as the usage's
``cached_tokens``. The cache is exact (no blocks): the verdict runs with a block of 1.
"""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest

from inferlab_bench.case.conversation import SessionLoad
from inferlab_bench.case.stage import CaseOptions, run_case
from inferlab_bench.protocol import ClientStatus
from tests.case.support import write_conversations
from tests.engine.conftest import StartServer
from tests.engine.support import case_request
from tests.engine.test_reset import slot_actions

pytestmark = pytest.mark.slow


def test_a_second_turn_reads_its_reusable_prefix_from_the_slot(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(parallel=1, extra=slot_actions(tmp_path))
    population = write_conversations(tmp_path / "population.jsonl", [[8, 8]] * 3, words=30)
    request = case_request(
        server,
        tmp_path / "case",
        population,
        request_count=2,
        warmup=1,
        reset_prefix_cache=True,
        load_shape={"kind": "concurrency_limited", "concurrency": 1},
    )
    options = CaseOptions(
        prefix_cache_reset="llamacpp",
        echo=io.StringIO(),
        sessions=SessionLoad(cache_block_tokens=1),
    )
    result = run_case(request, options)
    assert result.status is ClientStatus.SUCCEEDED, result.error
    document = orjson.loads((request.artifact_dir / "sessions.json").read_bytes())
    reuse = document["prefix_reuse"]
    assert reuse["prefix_reuse_reconciled"] == "pass", reuse["reason"]
    assert reuse["later_turns_hit"] == reuse["later_turns_expected_to_hit"] == 2
    assert reuse["cached_tokens_later"] >= reuse["expected_cached_tokens"] > 0
    # A first turn may read the chat template's opening the slot's previous session shares.
    first_turns = {check["name"]: check for check in reuse["checks"]}["first_turns_cold"]
    assert first_turns["verdict"] == "pass", first_turns

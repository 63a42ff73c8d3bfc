"""The bridge from the case stage's parsed records: columns, expectations, one document."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab_bench.case.records import CaseRecords, RecordColumns
from inferlab_bench.errors import PopulationError
from inferlab_bench.metric_tags import RECORD_TAGS
from inferlab_bench.protocol import ConcurrencyLimited
from inferlab_bench.validity import (
    Verdict,
    assess_case,
    expectations_from_population,
)
from inferlab_bench.validity.adapter import phase_records
from tests.validity.builders import MS, T0, ids


def columns(n: int, *, good: float = np.nan, first: int = 0, cached: float = 0.0) -> RecordColumns:
    start = T0 + np.arange(n, dtype=np.int64) * 100 * MS
    values = {tag: np.full(n, np.nan) for tag in RECORD_TAGS}
    values.update(
        usage_prompt_tokens=np.full(n, 50.0),
        output_sequence_length=np.full(n, 8.0),
        usage_prompt_cache_read_tokens=np.full(n, cached),
        good_request_count=np.full(n, good),
        time_to_first_token=np.full(n, 40.0),
        http_req_sending=np.full(n, 0.5),
    )
    if n:  # the first request opened the connection, inside its send (as aiohttp times it)
        values["http_req_connecting"][0] = 3.0
        values["http_req_sending"][0] = 3.5
    errors = np.zeros(n, dtype=bool)
    errors[-1:] = True
    return RecordColumns(
        session_num=np.arange(n, dtype=np.int64),
        conversation_id=list(ids(n, first)),
        x_request_id=[None] * n,
        credit_issued_ns=start - MS,
        start_ns=start,
        end_ns=start + 90 * MS,
        was_cancelled=np.zeros(n, dtype=bool),
        has_error=errors,
        error_message=[None] * n,
        metrics=values,
    )


def test_columns_become_phase_records() -> None:
    records = phase_records(columns(10, good=1.0))
    assert records.session_ids[0] == "inferlab-00000000"
    assert records.succeeded.tolist() == [True] * 9 + [False]
    assert records.good is not None and records.good.all()
    assert records.prompt_tokens[0] == 50.0


def test_client_send_time_is_the_traced_send_which_holds_the_connect() -> None:
    records = phase_records(columns(10))
    assert records.client_send_ms is not None
    # Not 3.0 + 3.5: the connect lies inside the send span (blocked is absent here).
    assert records.client_send_ms.tolist() == [3.5] + [0.5] * 9
    doc = assess_case(
        CaseRecords(warmup=columns(0), profiling=columns(10)),
        ConcurrencyLimited(kind="concurrency_limited", concurrency=1),
        expectations=None,
        population_sha256=None,
        reset_requested=False,
    )
    assert doc.dispatch.client_send_ms is not None and doc.dispatch.client_send_ms.mean == 0.8
    # Nothing was sampled from /proc: no client-cost verdict rather than an unknown one.
    assert doc.client_cost is None and "client_cost_low" not in doc.verdicts


def test_no_http_trace_means_no_client_send_figure() -> None:
    bare = columns(4)
    for tag in ("http_req_blocked", "http_req_connecting", "http_req_sending"):
        bare.metrics[tag][:] = np.nan
    assert phase_records(bare).client_send_ms is None


def test_no_good_request_count_means_no_slo() -> None:
    assert phase_records(columns(4)).good is None


def test_expectations_come_from_population_lines_and_their_evidence() -> None:
    population = [
        {"session_id": "inferlab-00000000", "output_length": 8},
        {"session_id": "inferlab-00000001", "output_length": 9},
    ]
    evidence = [{"index": 0, "input_tokens": 50}, {"index": 1, "input_tokens": 51}]
    expected = expectations_from_population(population, evidence)
    assert expected.input_tokens == {"inferlab-00000000": 50, "inferlab-00000001": 51}
    assert expected.output_tokens == {"inferlab-00000000": 8, "inferlab-00000001": 9}
    assert expectations_from_population(population, None).input_tokens == {}
    with pytest.raises(PopulationError, match="1 entries for 2 population lines"):
        expectations_from_population(population, evidence[:1])


def test_assess_case_carries_the_cold_start_verdict() -> None:
    records = CaseRecords(warmup=columns(2, first=100), profiling=columns(12, cached=5.0))
    population = [{"session_id": s, "output_length": 8} for s in ids(12)]
    evidence = [{"input_tokens": 50}] * 12
    doc = assess_case(
        records,
        ConcurrencyLimited(kind="concurrency_limited", concurrency=1),
        expectations=expectations_from_population(population, evidence),
        population_sha256="00" * 32,
        reset_requested=True,
    )
    assert doc.verdicts["prompt_tokens_reconciled"] is Verdict.PASS
    assert doc.verdicts["output_lengths_honored"] is Verdict.PASS
    assert doc.verdicts["cache_cold"] is Verdict.FAIL
    assert [s.phase for s in doc.sequences] == ["warmup", "profiling"]
    assert doc.prompt_tokens.compared == 11

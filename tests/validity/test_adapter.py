"""The bridge from the case stage's parsed records: columns, expectations, one document."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab_bench.case.records import CaseRecords, RecordColumns
from inferlab_bench.errors import PopulationError
from inferlab_bench.protocol import ConcurrencyLimited
from inferlab_bench.validity import Verdict, assess_case, expectations_from_population
from inferlab_bench.validity.adapter import phase_records
from tests.validity.builders import MS, T0, ids

TAGS = ("time_to_first_token", "request_latency", "inter_token_latency",
        "output_sequence_length", "good_request_count", "usage_prompt_tokens",
        "usage_prompt_cache_read_tokens")


def columns(n: int, *, good: float = np.nan, first: int = 0) -> RecordColumns:
    start = T0 + np.arange(n, dtype=np.int64) * 100 * MS
    values = {tag: np.full(n, np.nan) for tag in TAGS}
    values.update(usage_prompt_tokens=np.full(n, 50.0), output_sequence_length=np.full(n, 8.0),
                  usage_prompt_cache_read_tokens=np.zeros(n), good_request_count=np.full(n, good))
    errors = np.zeros(n, dtype=bool)
    errors[-1] = True
    return RecordColumns(
        session_num=np.arange(n, dtype=np.int64), conversation_id=list(ids(n, first)),
        x_request_id=[None] * n, credit_issued_ns=start - MS, start_ns=start,
        end_ns=start + 90 * MS,
        was_cancelled=np.zeros(n, dtype=bool), has_error=errors, error_message=[None] * n,
        metrics=values,
    )


def test_columns_become_phase_records() -> None:
    records = phase_records(columns(10, good=1.0))
    assert records.session_ids[0] == "inferlab-00000000"
    assert records.succeeded.tolist() == [True] * 9 + [False]
    assert records.good is not None and records.good.all()
    assert records.prompt_tokens[0] == 50.0


def test_no_good_request_count_means_no_slo() -> None:
    assert phase_records(columns(4)).good is None


def test_expectations_come_from_population_lines_and_their_evidence() -> None:
    population = [{"session_id": "inferlab-00000000", "output_length": 8},
                  {"session_id": "inferlab-00000001", "output_length": 9}]
    evidence = [{"index": 0, "input_tokens": 50}, {"index": 1, "input_tokens": 51}]
    expected = expectations_from_population(population, evidence)
    assert expected.input_tokens == {"inferlab-00000000": 50, "inferlab-00000001": 51}
    assert expected.output_tokens == {"inferlab-00000000": 8, "inferlab-00000001": 9}
    assert expectations_from_population(population, None).input_tokens == {}
    with pytest.raises(PopulationError, match="1 entries for 2 population lines"):
        expectations_from_population(population, evidence[:1])


def test_assess_case_carries_the_stage_cold_start_verdict() -> None:
    records = CaseRecords(warmup=columns(2, first=100), profiling=columns(12))
    population = [{"session_id": s, "output_length": 8} for s in ids(12)]
    evidence = [{"input_tokens": 50}] * 12
    doc = assess_case(records, ConcurrencyLimited(kind="concurrency_limited", concurrency=1),
                      expectations=expectations_from_population(population, evidence),
                      population_sha256="00" * 32, reset_requested=True, post_reset_cold=False)
    assert doc.verdicts["prompt_tokens_reconciled"] is Verdict.PASS
    assert doc.verdicts["output_lengths_honored"] is Verdict.PASS
    assert doc.verdicts["cache_cold"] is Verdict.FAIL
    assert [s.phase for s in doc.sequences] == ["warmup", "profiling"]
    assert doc.prompt_tokens.compared == 11

"""The validity document: every verdict, a stable schema, JSON round trip, summary lines."""

from __future__ import annotations

import json

import numpy as np

from inferlab_bench.protocol import ConcurrencyLimited
from inferlab_bench.validity import (
    VALIDITY_SCHEMA,
    CaseFacts,
    Expectations,
    ValidityDocument,
    Verdict,
    assess,
    failed_check_text,
    summarize_trials,
    summary_lines,
    trial_lines,
)
from tests.validity.builders import closed_loop, ids, records

LOAD = ConcurrencyLimited(kind="concurrency_limited", concurrency=4)


def facts(prompt: int = 100) -> CaseFacts:
    expected = Expectations(
        input_tokens={s: prompt for s in ids(40)}, output_tokens={s: 10 for s in ids(40)}
    )
    return CaseFacts(
        load=LOAD, expectations=expected, population_sha256="ab" * 32, reset_requested=True
    )


def test_a_healthy_case_passes_every_verdict() -> None:
    doc = assess(closed_loop(4, 40, latency_ms=100, gap_ms=1), None, facts())
    assert doc.verdict is Verdict.PASS, doc.verdicts
    assert set(doc.verdicts) == {
        "requests_succeeded",
        "load_generator_kept_up",
        "prompt_tokens_reconciled",
        "output_lengths_honored",
        "cache_cold",
    }
    assert doc.failed() == []


def test_the_document_round_trips_as_json() -> None:
    doc = assess(closed_loop(4, 40, latency_ms=100, gap_ms=1), None, facts(prompt=90))
    text = json.dumps(doc.to_json_dict())
    back = ValidityDocument.model_validate(json.loads(text))
    assert back == doc
    assert json.loads(text)["schema_name"] == VALIDITY_SCHEMA
    assert json.loads(text)["schema_version"] == 1
    assert doc.failed() == ["prompt_tokens_reconciled"]


def test_failed_checks_say_what_failed_and_by_how_much() -> None:
    healthy = assess(closed_loop(4, 40, latency_ms=100, gap_ms=1), None, facts())
    assert healthy.failed_checks() == []
    short = assess(closed_loop(4, 40, latency_ms=100, gap_ms=1), None, facts(prompt=90))
    [check] = short.failed_checks()
    assert check == short.prompt_tokens.check
    assert check.observed is not None and check.bound is not None
    assert (
        failed_check_text(check) == f"{check.name} {check.observed:.3g} (bound {check.bound:.3g})"
    )


def test_warmup_adds_its_digest_and_cache_ratio() -> None:
    warm = records(np.arange(4, dtype=np.int64) + 10**18, cached=0.0, session_ids=ids(4, 100))
    doc = assess(closed_loop(4, 40, latency_ms=100, gap_ms=1), warm, facts())
    assert [s.phase for s in doc.sequences] == ["warmup", "profiling"]
    assert [p.phase for p in doc.cache.phases] == ["warmup", "profiling"]


def test_summary_lines_name_each_verdict_and_its_figures() -> None:
    doc = assess(closed_loop(4, 40, latency_ms=10, gap_ms=10), None, facts(prompt=92))
    text = "\n".join(summary_lines(doc))
    assert "validity: fail" in text
    assert "load generator kept up: fail" in text and "held_concurrency_ratio" in text
    assert "prompt tokens reconciled: fail" in text and "+8" in text
    assert "output lengths honored: pass" in text
    assert "cache cold: pass" in text


def test_trial_lines_say_unknown_with_one_trial() -> None:
    one = trial_lines(summarize_trials([{"request_throughput": 3.0}]))
    assert "unknown" in one[0]
    many = trial_lines(summarize_trials([{"request_throughput": v} for v in (3.0, 3.2, 2.9)]))
    assert "95% CI, 3 trials" in many[0]

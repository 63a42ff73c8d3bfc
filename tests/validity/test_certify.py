"""MLPerf's early-stopping rule, reproduced from our implementation (no table copied in)."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab_bench.protocol import BenchRequestSloInput, ConcurrencyLimited
from inferlab_bench.validity import CaseFacts, assess, summary_lines
from inferlab_bench.validity.certify import (
    bound_claim,
    bound_holds,
    certify,
    claim,
    passing_count,
    samples_for_bound,
    samples_for_estimate,
)
from tests.validity.builders import closed_loop


def test_the_counts_the_loadgen_rule_gives() -> None:
    # Against a bound with no sample over it: p^h <= 0.01.
    assert [samples_for_bound(0, p) for p in (90, 95, 99)] == [44, 90, 459]
    # As an estimate: h(1) + 1.
    assert [samples_for_estimate(p) for p in (90, 95, 97, 99, 99.9)] == [
        64,
        130,
        219,
        662,
        6636,
    ]


def test_certification_flips_at_the_thresholds() -> None:
    assert not bound_holds(458, 0, 99) and bound_holds(459, 0, 99)  # 0.99^459 <= 0.01 < 0.99^458
    slow = np.linspace(1.0, 2.0, 661)
    assert not claim(slow, "ttft_ms", 99).certified
    assert claim(np.append(slow, 3.0), "ttft_ms", 99).certified
    # Each sample over the bound costs more than one sample more.
    assert samples_for_bound(1, 99) - samples_for_bound(0, 99) > 1


def test_the_claimed_value_discards_the_highest_samples_the_rule_allows() -> None:
    values = np.arange(1, 2001, dtype=float)  # 2000 samples, sorted
    found = claim(values, "request_latency_ms", 99)
    # The largest t with n >= h(t) + t, found here by brute force from h itself.
    t = max(t for t in range(1, 40) if passing_count(t, 99) + t <= 2000)
    assert found.certified and found.discarded_highest == t - 1
    assert found.early_stopping_value == values[2000 - t]
    assert found.value == pytest.approx(np.percentile(values, 99))


def test_a_short_run_says_what_it_certifies_and_what_each_percentile_needs() -> None:
    metric = certify(np.linspace(10, 50, 100), "ttft_ms")
    assert metric.highest_certified_percentile == 90.0
    assert [(c.percentile, c.certified, c.needed_samples) for c in metric.claims] == [
        (90.0, True, 64),
        (95.0, False, 130),
        (99.0, False, 662),
    ]


def test_validity_carries_certification_and_says_it_in_words() -> None:
    facts = CaseFacts(load=ConcurrencyLimited(kind="concurrency_limited", concurrency=4))
    doc = assess(closed_loop(4, 40, latency_ms=100, gap_ms=1), None, facts)
    ttft = next(m for m in doc.certification if m.metric == "ttft_ms")
    assert ttft.samples == 40 and ttft.highest_certified_percentile is None
    assert not any(c.certified for c in ttft.claims)
    text = "\n".join(summary_lines(doc))
    assert "ttft_ms percentiles from 40 requests: none certified" in text
    assert "p99 needs 662" in text
    assert doc.to_json_dict()["certification"][0]["claims"][2]["needed_samples"] == 662


def test_an_slo_bound_is_certified_only_with_enough_requests() -> None:
    within = np.full(60, 100.0)
    # p90 with none over needs 44 requests: 60 certify it.
    held = bound_claim(within, "ttft_ms", 500.0, 90.0)
    assert held.certified and held.met_by_share and held.needed_samples == 44
    # 40 requests keep the bound by share but cannot certify it.
    short = bound_claim(within[:40], "ttft_ms", 500.0, 90.0)
    assert short.met_by_share and not short.certified
    # A failed request (NaN) counts as over the bound.
    failed = np.append(within, [np.nan] * 10)
    assert bound_claim(failed, "ttft_ms", 500.0, 90.0).over_bound == 10


def test_validity_certifies_each_slo_bound_at_its_good_request_ratio() -> None:
    slo = BenchRequestSloInput(ttft_ms=500.0, minimum_good_request_ratio=0.9)
    facts = CaseFacts(load=ConcurrencyLimited(kind="concurrency_limited", concurrency=4), slo=slo)
    doc = assess(closed_loop(4, 40, latency_ms=100, gap_ms=1), None, facts)
    [claim_] = doc.slo_bounds
    assert (claim_.metric, claim_.percentile, claim_.samples) == ("ttft_ms", 90.0, 40)
    assert claim_.met_by_share and not claim_.certified  # 40 < 44
    assert "SLO ttft_ms <= 500 at p90: holds by share but not certified: 4 more" in "\n".join(
        summary_lines(doc)
    )

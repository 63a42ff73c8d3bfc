"""The server's /metrics: parsed, differenced over the run, mapped beside our totals."""

from __future__ import annotations

import pytest

from inferlab_bench.case.server_metrics import Scrape, comparison, family, parse_prometheus

BEFORE = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 100
llamacpp:prompt_tokens_cached_total 3
llamacpp:tokens_predicted_total 40
llamacpp:requests_processing 0
"""
AFTER = BEFORE.replace(" 100", " 400").replace(" 3\n", " 13\n").replace(" 40\n", " 136\n")


def test_samples_sum_over_labels() -> None:
    text = 'x_total{a="1"} 2\nx_total{a="2"} 3 1700000000\n# comment\ny 1.5e3\n'
    assert parse_prometheus(text) == {"x_total": 5.0, "y": 1500.0}


def test_llamacpp_deltas_sit_beside_our_totals() -> None:
    before, after = Scrape(1, parse_prometheus(BEFORE)), Scrape(2, parse_prometheus(AFTER))
    assert family(after.values) == "llamacpp"
    ours = {"prompt_tokens": 310.0, "output_tokens": 96.0, "cached_prompt_tokens": 10.0}
    document = comparison(before, after, ours)
    figures = document["figures"]
    assert figures["prompt_tokens"]["server"] == 310.0  # processed + cached
    assert figures["prompt_tokens"]["difference"] == 0.0
    assert figures["output_tokens"] == {
        "server": 96.0,
        "ours": 96.0,
        "difference": 0.0,
        "counters": ["llamacpp:tokens_predicted_total"],
    }
    assert figures["cached_prompt_tokens"]["server"] == 10.0
    assert "llamacpp:requests_processing" not in document["counter_deltas"]


def test_a_server_without_metrics_is_said_so() -> None:
    assert comparison(None, None, {"prompt_tokens": 1.0})["served"] is False


def test_latency_means_come_from_histogram_deltas_beside_ours() -> None:
    def text(count: int, total: float) -> str:
        return (
            f'vllm:time_to_first_token_seconds_count{{model_name="m"}} {count}\n'
            f'vllm:time_to_first_token_seconds_sum{{model_name="m"}} {total}\n'
            "vllm:prompt_tokens_total 0\n"
        )

    before = Scrape(1, parse_prometheus(text(2, 0.5)))
    after = Scrape(2, parse_prometheus(text(6, 0.9)))  # 4 more, 0.4 s: a 100 ms mean
    document = comparison(before, after, {"ttft_ms": 103.0, "request_latency_ms": 900.0})
    (ttft,) = document["latencies"].values()
    assert ttft["server_mean"] == pytest.approx(100.0) and ttft["server_count"] == 4
    assert ttft["client_added"] == pytest.approx(3.0)
    assert "request_latency_ms" not in document["latencies"]  # no e2e histogram scraped

"""Token goodput over the profiling request window."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab_bench.validity import token_goodput
from tests.validity.builders import T0, records


def test_good_tokens_per_second_over_the_request_window() -> None:
    starts = T0 + np.array([0, 10**9], dtype=np.int64)
    ends = starts + np.array([10**9, 10**9], dtype=np.int64)  # window: 2 s
    good = np.array([True, False])
    result = token_goodput(
        records(starts, ends, prompt=100.0, output=np.array([40.0, 60.0]), good=good)
    )
    assert result.window_seconds == pytest.approx(2.0)
    assert (result.good_requests, result.good_output_tokens, result.good_total_tokens) == (
        1,
        40,
        140,
    )
    assert result.request_goodput == pytest.approx(0.5)
    assert result.good_output_token_goodput == pytest.approx(20.0)
    assert result.good_total_token_goodput == pytest.approx(70.0)


def test_a_failed_request_is_never_good() -> None:
    starts = T0 + np.array([0, 0], dtype=np.int64)
    result = token_goodput(
        records(starts, good=np.array([True, True]), succeeded=np.array([True, False]))
    )
    assert result.good_requests == 1


def test_without_an_slo_there_is_no_goodput() -> None:
    result = token_goodput(records(T0 + np.array([0, 5], dtype=np.int64)))
    assert not result.slo_set and result.good_output_token_goodput is None

"""read_bursts: how late a stream's tokens were read at least, from its chunk gaps."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab_bench.validity.read_bursts import FIRST_SHARE, STALL_SHARE, burst_lateness


def _lateness(
    streams: list[list[float]], itl: list[float], share: float = FIRST_SHARE
) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.array([len(s) for s in streams], dtype=np.int64)
    gaps = np.array([g for s in streams for g in s], dtype=np.float64)
    return burst_lateness(lengths, gaps, np.array(itl, dtype=np.float64), share)


def test_a_punctual_stream_has_no_burst() -> None:
    first, largest = _lateness([[15.0, 14.0, 16.0, 15.0]], [15.0])
    assert first.tolist() == [0.0] and largest.tolist() == [0.0]


def test_an_opening_burst_counts_every_gap_in_it() -> None:
    """Three tokens read within 0.5 ms that left 15 ms apart: the first was 29.5 ms late."""
    first, largest = _lateness([[0.2, 0.3, 15.0, 15.0]], [15.0])
    assert first[0] == pytest.approx(29.5) and largest[0] == pytest.approx(29.5)


def test_the_largest_burst_may_lie_mid_stream_or_at_its_end() -> None:
    """A stall mid-stream (a 45 ms gap, then three tokens at once) and a smaller one that ends
    the stream: the first token was read on time, the largest burst is the middle one."""
    gaps = [15.0, 45.0, 0.1, 0.1, 0.1, 15.0, 30.0, 0.4]
    first, largest = _lateness([gaps], [15.0])
    assert first[0] == 0.0
    assert largest[0] == pytest.approx(3 * 15.0 - 0.3)


def test_bursts_do_not_run_across_streams() -> None:
    """The end of one stream's burst and the start of the next stream's are two bursts; a
    stream without gaps or without an ITL is not measured (NaN)."""
    first, largest = _lateness(
        [[15.0, 0.1], [0.1, 15.0], [], [0.1, 0.1]], [15.0, 15.0, 15.0, np.nan]
    )
    assert largest[0] == pytest.approx(14.9) and first[0] == 0.0
    assert first[1] == pytest.approx(14.9) and largest[1] == pytest.approx(14.9)
    assert np.isnan(first[2]) and np.isnan(largest[2])
    assert np.isnan(first[3]) and np.isnan(largest[3])


def test_a_gap_at_the_share_of_the_itl_is_not_a_burst() -> None:
    """Server jitter: a gap at or above the share of the ITL is taken as the server's; the
    largest burst asks a tighter share (two tokens a server wrote together come 1-7 ms
    apart against a 15 ms ITL, a frozen client reads them 0.1-0.3 ms apart)."""
    first, largest = _lateness([[7.5, 22.5, 7.6]], [15.0])
    assert first[0] == 0.0 and largest[0] == 0.0
    _, largest = _lateness([[15.0, 4.0, 15.0, 0.2, 15.0]], [15.0], STALL_SHARE)
    assert largest[0] == pytest.approx(14.8)

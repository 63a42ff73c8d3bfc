"""Bursts in the client's reads: how late, at least, a stream's tokens were read.

A server writes a stream's tokens about one ITL apart. A client that was not running when
some came (frozen, throttled, waiting for a core) reads them together once it runs again:
a burst, a run of chunk gaps each far under the ITL. A burst of k such gaps means k + 1
tokens that left the server over about k ITLs were read within the burst's own span, so
the first of them was read at least ``sum(ITL - gap)`` over the burst late.

Per stream two figures, both lower bounds: the burst that opens the stream (the first
token's lateness; the first gap is AIPerf's time to second token) and the largest burst
anywhere in it (the longest the client was seen stalled while the stream came, which
reaches the E2E when it covers the end and the ITL in any case). A server or a proxy that
holds tokens and writes them together looks the same from the client: the estimate cannot
tell who held them, and the calibration (docs/calibration.md) measures how often that
confusion costs a false alarm.
"""

from __future__ import annotations

import numpy as np

from inferlab_bench.validity.inputs import FloatArray, Int64Array

FIRST_SHARE = 0.5
"""For the first burst, a chunk gap under this share of the stream's ITL is in the burst
(calibrated on TTST against the simulator's truth: braked runs read the first two tokens
within 0.2 ITL on 62% of requests, null runs never within 0.5)."""
STALL_SHARE = 0.2
"""For the largest burst, under this share: against llama.cpp with nothing wrong, two
tokens written together gave gaps up to half an ITL (the largest burst's p90 8-9 ms against a
bound of 10-11 at 0.5, 5-6 ms at 0.2) while a frozen client's gaps were 0.1-0.3 ms."""


def burst_lateness(
    lengths: Int64Array, gaps: FloatArray, itl: FloatArray, share: float
) -> tuple[FloatArray, FloatArray]:
    """Per stream (first burst, largest burst) in ms; NaN where a stream has no gaps or ITL.

    ``gaps`` holds every stream's chunk gaps one stream after another, ``lengths[i]`` of them
    for stream ``i``; ``itl[i]`` is its mean inter-token latency; a gap under ``share`` of
    the ITL is in a burst. A stream without a burst gives 0 for both.
    """
    n = lengths.size
    first = np.full(n, np.nan)
    largest = np.full(n, np.nan)
    known = (lengths > 0) & np.isfinite(itl) & (itl > 0)
    first[known] = 0.0
    largest[known] = 0.0
    owner = np.repeat(np.arange(n), lengths)
    stream_itl = itl[owner]
    in_burst = np.isfinite(gaps) & (gaps < share * stream_itl) & known[owner]
    if not in_burst.any():
        return first, largest
    position = np.arange(gaps.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    continues = np.concatenate(([False], in_burst[:-1])) & (position > 0)
    opens = in_burst & ~continues
    burst = np.cumsum(opens) - 1  # each gap's burst number (meaningful where in_burst)
    totals = np.bincount(burst[in_burst], weights=(stream_itl - gaps)[in_burst])
    streams = owner[opens]
    np.maximum.at(largest, streams, totals)
    opening = position[opens] == 0
    first[streams[opening]] = totals[opening]
    return first, largest

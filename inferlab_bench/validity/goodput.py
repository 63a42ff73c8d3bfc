"""Token goodput: good output tokens/s and good total tokens/s next to request goodput.

The window is the one the case stage uses for request goodput (duration source
``native-profiling-request-window``): from the earliest start to the latest end of the
profiling records. A good request is one AIPerf counted in ``good_request_count``.
"""

from __future__ import annotations

import numpy as np

from inferlab_bench.validity.inputs import PhaseRecords
from inferlab_bench.validity.verdict import Figures

NS_PER_S = 1e9


class TokenGoodput(Figures):
    """Goodput in requests, output tokens and total tokens per second over one window."""

    slo_set: bool
    window_seconds: float | None
    good_requests: int | None
    request_goodput: float | None
    good_output_tokens: int | None
    good_output_token_goodput: float | None
    good_total_tokens: int | None
    good_total_token_goodput: float | None


def window_seconds(records: PhaseRecords) -> float | None:
    """Seconds from the earliest start to the latest end (None when empty or zero)."""
    if len(records) == 0:
        return None
    span = float(records.end_ns.max() - records.start_ns.min()) / NS_PER_S
    return span if span > 0 else None


def token_goodput(records: PhaseRecords) -> TokenGoodput:
    """Sum the tokens of good requests and divide by the window (all None without an SLO)."""
    window = window_seconds(records)
    if records.good is None or window is None:
        return TokenGoodput(
            slo_set=records.good is not None,
            window_seconds=window,
            good_requests=None,
            request_goodput=None,
            good_output_tokens=None,
            good_output_token_goodput=None,
            good_total_tokens=None,
            good_total_token_goodput=None,
        )
    good = records.good & records.succeeded
    output = float(np.nansum(records.output_tokens[good]))
    total = output + float(np.nansum(records.prompt_tokens[good]))
    return TokenGoodput(
        slo_set=True,
        window_seconds=window,
        good_requests=int(good.sum()),
        request_goodput=float(good.sum()) / window,
        good_output_tokens=int(output),
        good_output_token_goodput=output / window,
        good_total_tokens=int(total),
        good_total_token_goodput=total / window,
    )

"""Order statistics of one per-request quantity, as written into validity.json."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from inferlab_bench.validity.verdict import Figures


class Distribution(Figures):
    """Count, extremes, mean and the usual percentiles of a sample (finite values only)."""

    count: int
    minimum: float
    p50: float
    p95: float
    p99: float
    maximum: float
    mean: float


def describe(values: npt.ArrayLike) -> Distribution | None:
    """Summarize the finite values; None when there are none."""
    array = np.asarray(values, dtype=np.float64)
    finite = array[np.isfinite(array)]
    if finite.size == 0:
        return None
    p50, p95, p99 = np.percentile(finite, [50, 95, 99])
    return Distribution(
        count=int(finite.size),
        minimum=float(finite.min()),
        p50=float(p50),
        p95=float(p95),
        p99=float(p99),
        maximum=float(finite.max()),
        mean=float(finite.mean()),
    )

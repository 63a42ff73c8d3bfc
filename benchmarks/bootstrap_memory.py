"""Time and peak memory of reproduce's verdict against a 100k-request baseline.

The bootstrap used to resample every request 2000 times per percentile (2000 x n values: a
100k-request vLLM baseline took 4.8 GB and 37 s). It now draws a large trial's percentile by
order statistic (``publish.verdict.resampled_percentiles``). Target: under 5 s and 500 MB.

    python benchmarks/bootstrap_memory.py            # 100k requests per side
    python benchmarks/bootstrap_memory.py --requests 20000
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from inferlab_bench.publish.verdict import Side, judge_case


def side(rng: np.random.Generator, n: int, scale: float) -> Side:
    samples = {c: rng.gamma(4.0, scale, n) for c in ("ttft_ms", "tpot_ms", "request_latency_ms")}
    return Side(metrics=({"output_throughput": 1.0},), samples=(samples,))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    a, b = side(rng, args.requests, 10.0), side(rng, args.requests, 10.0)
    tracemalloc.start()
    began = time.perf_counter()
    case = judge_case("baseline", a, b)
    seconds = time.perf_counter() - began
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    calls = sum(m.verdict in ("faster", "slower") for m in case.metrics)
    print(
        f"{args.requests} requests per side, {len(case.metrics)} metrics: {seconds:.2f} s, "
        f"peak {peak / 1e6:.1f} MB (tracemalloc); null difference called in {calls}"
    )


if __name__ == "__main__":
    main()

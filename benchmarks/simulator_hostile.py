"""Hostile clients of the simulator: /health latency while each is refused, and peak memory.

Starts ``inferlab-bench simulate`` as its own process (Qwen2's tokenizer, no modeled latency),
then sends each attack of ``tests/reliability/hostile.py`` in turn (a 100 MB body declared and
chunked, ``n=10^6``, huge counts, a prompt beyond the context, deep JSON, wrong media types,
slow and silent connections) while a prober on its own keep-alive connection times
``GET /health`` every 10 ms. Prints per attack: the answer, how long it took, the /health
latencies during it (p50 / p99 / max ms, and how many), and the server's peak resident memory
(VmHWM) after it. The 100 ms claim is the max column of the first rows.

    python benchmarks/simulator_hostile.py [--repeats 3] [--body-mb 100] [--n 1000000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.reliability import hostile  # noqa: E402

IDLE_S = 1.0


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _row(name: str, send: Callable[[], hostile.Answer], server: hostile.Server) -> float:
    with hostile.probing(server) as probe:
        start = time.perf_counter()
        answer = send()
        took = time.perf_counter() - start
    ms = [1000 * x for x in probe.latencies]
    said = (
        f"{answer.status} {answer.message[:48]}"
        if answer.status is not None
        else f"closed after {answer.closed_after_s:.2f} s"
        if answer.closed_after_s is not None
        else "left open"
    )
    print(
        f"  {name[:44]:44s} {said[:56]:56s} {took:6.2f} s  /health "
        f"{statistics.median(ms):5.1f} / {_quantile(ms, 0.99):6.1f} / {max(ms):6.1f} ms "
        f"(n={len(ms)}, failed {probe.failures})  peak {server.peak_rss_mb():.0f} MB",
        flush=True,
    )
    return max(ms)


def run(repeats: int, body_mb: int, n: int) -> None:
    from inferlab_bench.runs.demo import TOKENIZER_DIR

    flags = ["--tokenizer", TOKENIZER_DIR, "--zero-latency"]
    flags += ["--idle-timeout-seconds", str(IDLE_S), "--body-timeout-seconds", str(IDLE_S)]
    worst: dict[str, float] = {}
    for repeat in range(repeats):
        with hostile.simulator_process(*flags) as server:
            print(f"run {repeat + 1}: server started at {server.start_mb:.0f} MB resident")
            for attack in hostile.attacks(body_bytes=body_mb * hostile.MB, n=n):
                top = _row(attack.name, lambda a=attack: a.send(server), server)
                worst[attack.name] = max(worst.get(attack.name, 0.0), top)
            extra = {
                "slowloris head (a line every 0.2 s)": lambda: hostile.slow_head(server, 0.2, 5),
                "silent connection": lambda: hostile.silent(server, 5),
                "slow body": lambda: hostile.slow_body(server, IDLE_S),
            }
            for name, send in extra.items():
                worst[name] = max(worst.get(name, 0.0), _row(name, send, server))
            print(f"  grown {server.peak_rss_mb() - server.start_mb:.0f} MB at peak")
    print("worst /health ms over the runs:")
    for name, ms in worst.items():
        print(f"  {name[:44]:44s} {ms:7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--body-mb", type=int, default=100)
    parser.add_argument("--n", type=int, default=10**6)
    args = parser.parse_args()
    run(args.repeats, args.body_mb, args.n)


if __name__ == "__main__":
    main()

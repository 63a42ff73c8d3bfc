"""Reading a big peer file: a vLLM ``--save-detailed`` result of N requests (15 token gaps
each), made here, read by ``publish.peers.load_baseline``; prints its size, the read time and
the peak RSS of the reading process (a child, so building the file is not counted).

    python benchmarks/peer_files.py                 # 100000 requests
    python benchmarks/peer_files.py --requests 20000
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent.parent / "tests/publish/fixtures"


def make(path: Path, n: int) -> None:
    rng = random.Random(0)
    data = json.loads((FIXTURE / "vllm-0.33.0-c2-detailed.json").read_text())
    ttfts = [rng.uniform(0.005, 0.02) for _ in range(n)]
    data.update(
        completed=n,
        num_prompts=n,
        ttfts=ttfts,
        latencies=[t + 0.13 for t in ttfts],
        output_lens=[16] * n,
        itls=[[0.008] * 15 for _ in range(n)],
        errors=[""] * n,
        input_lens=[64] * n,
        generated_texts=[""] * n,
    )
    path.write_text(json.dumps(data))


def read(path: Path) -> None:
    from inferlab_bench.publish.peers import load_baseline

    started = time.perf_counter()
    baseline = load_baseline(path)
    seconds = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    samples = baseline.cases[0].samples
    kept = 0 if samples is None else samples[0]["ttft_ms"].size
    print(f"read {kept} requests in {seconds:.2f} s; peak RSS of the reader {rss:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--read", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read is not None:
        read(args.read)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vllm-detailed.json"
        make(path, args.requests)
        print(f"{path.stat().st_size / 1e6:.1f} MB vLLM file, {args.requests} requests")
        subprocess.run([sys.executable, __file__, "--read", str(path)], check=True)


if __name__ == "__main__":
    main()

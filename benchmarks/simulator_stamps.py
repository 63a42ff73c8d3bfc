"""How tight the simulator's ground-truth stamps are, seen by a minimal client.

Starts ``inferlab-bench simulate`` as its own process with a ground-truth file, sends
streaming completions one at a time over a raw socket, and stamps (wall clock) when the
first token's bytes arrive. Against the server's stamps it prints, in ms (min / p50 / p90 /
max): the client's time minus the stamp after the write (``first_token_ns``, the only stamp
before) and minus the stamp before it (``first_token_before_ns``, what ``ttft_ns`` uses),
how many arrivals came before each stamp, the write itself, the scheduler's lag against the
model's due time, and arrival -> handler -> admission.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import orjson

BODY = b'{"prompt":"hello","max_tokens":4,"ignore_eos":true,"stream":true}'
REQUEST = (
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
)


def first_token_arrival_ns(port: int) -> int:
    """One streaming completion on a fresh socket; wall ns when its first token arrived."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(REQUEST)
        seen = b""
        while b'"text"' not in seen:
            seen += sock.recv(65536)
        stamp = time.time_ns()
        while not seen.endswith(b"0\r\n\r\n"):
            seen += sock.recv(65536)
    return stamp


def spread(values: Sequence[float]) -> str:
    """min / p50 / p90 / max of ``values``."""
    ordered = sorted(values)
    pick = [ordered[0], ordered[len(ordered) // 2], ordered[int(0.9 * len(ordered))], ordered[-1]]
    return " / ".join(f"{v:7.3f}" for v in pick)


def run(requests: int, prefill_ms: float) -> list[str]:
    """Serve ``requests`` one by one; the lines of the report."""
    with tempfile.TemporaryDirectory() as tmp:
        truth_path = Path(tmp) / "truth.jsonl"
        cmd = [sys.executable, "-m", "inferlab_bench", "simulate", "--port", "0"]
        cmd += ["--ground-truth", str(truth_path), "--prefill-base-ms", str(prefill_ms)]
        cmd += ["--prefill-ms-per-token", "0", "--decode-base-ms", "4"]
        server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline().split()[-1].rsplit(":", 1)[1])
            seen = [first_token_arrival_ns(port) for _ in range(requests)]
            time.sleep(0.2)
        finally:
            server.terminate()
            server.wait(timeout=15)
        truth = [orjson.loads(line) for line in truth_path.read_bytes().splitlines()]
    return report(seen, truth)


def report(seen: Sequence[int], truth: Sequence[dict[str, int]]) -> list[str]:
    """The figures, one per line."""

    def between(key: str, base: str) -> list[float]:
        return [(r[key] - r[base]) / 1e6 for r in truth]

    def client_minus(key: str) -> list[float]:
        return [(c - r[key]) / 1e6 for c, r in zip(seen, truth, strict=True)]

    after, before = client_minus("first_token_ns"), client_minus("first_token_before_ns")
    lag = [r["first_token_lag_ns"] / 1e6 for r in truth]
    write = between("first_token_ns", "first_token_before_ns")
    return [
        f"{len(seen)} requests at c=1; ms as min / p50 / p90 / max",
        f"client - after-write stamp   {spread(after)}   earlier: {sum(a < 0 for a in after)}",
        f"client - before-write stamp  {spread(before)}   earlier: {sum(b < 0 for b in before)}",
        f"write (after - before)       {spread(write)}",
        f"scheduler lag, first token   {spread(lag)}",
        f"handler - arrival            {spread(between('handler_ns', 'arrival_ns'))}",
        f"admission - arrival          {spread(between('admitted_ns', 'arrival_ns'))}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=80)
    parser.add_argument("--prefill-ms", type=float, default=8.0)
    args = parser.parse_args()
    print("\n".join(run(args.requests, args.prefill_ms)))


if __name__ == "__main__":
    main()

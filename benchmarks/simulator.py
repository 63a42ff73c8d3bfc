"""How fast the simulator serves with zero modeled latency (so it never bounds a measurement).

Starts ``inferlab-bench simulate --zero-latency`` as its own process (as AIPerf would see
it), drives it with an aiohttp client at a fixed concurrency with streaming chat requests
of exactly N output tokens, checks every stream ended with [DONE] and the right usage,
and prints requests/s, tokens/s and the server's CPU use.

    python benchmarks/simulator.py --requests 2000 --concurrency 32 --tokens 16
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass

import aiohttp
import orjson


@dataclass(frozen=True)
class Outcome:
    """What one benchmark run measured."""

    requests: int
    tokens: int
    seconds: float
    server_cpu_seconds: float


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _one(session: aiohttp.ClientSession, url: str, i: int, tokens: int) -> int:
    body = {
        "model": "sim-model",
        "messages": [{"role": "user", "content": f"request {i} " * 8}],
        "max_tokens": tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    usage, done = None, False
    async with session.post(
        url, data=orjson.dumps(body), headers={"content-type": "application/json"}
    ) as resp:
        async for line in resp.content:
            if line.startswith(b"data: [DONE]"):
                done = True
            elif line.startswith(b"data: ") and b'"usage"' in line:
                usage = orjson.loads(line[6:])["usage"]
    if not done or usage is None or usage["completion_tokens"] != tokens:
        raise RuntimeError(f"request {i}: incomplete stream (done={done}, usage={usage})")
    return tokens


async def _drive(base_url: str, requests: int, concurrency: int, tokens: int) -> tuple[int, float]:
    url = f"{base_url}/v1/chat/completions"
    counter = iter(range(requests))
    total = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal total
        for i in counter:
            done = await _one(session, url, i, tokens)
            total += done

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        await _one(session, url, -1, tokens)  # warm the connection pool and the server
        start = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        return total, time.perf_counter() - start


def run(requests: int, concurrency: int, tokens: int) -> Outcome:
    """Start the server process, drive it, stop it."""
    cmd = [sys.executable, "-m", "inferlab_bench", "simulate", "--port", "0", "--zero-latency"]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().split()[-1]
        cpu_before = _cpu_seconds(server.pid)
        total, seconds = asyncio.run(_drive(base_url, requests, concurrency, tokens))
        cpu = _cpu_seconds(server.pid) - cpu_before
    finally:
        server.terminate()
        server.wait(timeout=15)
    return Outcome(requests, total, seconds, cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    out = run(args.requests, args.concurrency, args.tokens)
    print(
        f"{out.requests} streaming requests x {args.tokens} tokens at concurrency "
        f"{args.concurrency} in {out.seconds:.2f} s"
    )
    print(
        f"  {out.requests / out.seconds:,.0f} requests/s, {out.tokens / out.seconds:,.0f} tokens/s"
    )
    print(
        f"  server CPU {out.server_cpu_seconds:.2f} s "
        f"({100 * out.server_cpu_seconds / out.seconds:.0f}% of one core, "
        f"{1e3 * out.server_cpu_seconds / out.requests:.2f} ms per request)"
    )


if __name__ == "__main__":
    main()

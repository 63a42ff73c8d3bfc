"""Peer clients side by side against one simulator: per-request error against its ground truth.

Our client (AIPerf driven as our case stage drives it: our plugin, our environment), GuideLLM
(``guidellm run`` with a scenario file), SGLang's ``bench_serving`` and vLLM's ``bench serve``
run the same prompts at the same loads (c=1, c=4, c=16 and a poisson rate) against one
``inferlab-bench simulate`` process. Each request a client measured is joined to the server's
ground-truth record, and its TTFT, ITL and end-to-end latency minus the truth's (the client's
overhead, in ms) is summarised per run (p50, p90, max); each load runs ``--repeats`` times
with the clients interleaved, and the table shows the median of the per-run figures with
their spread. The last line compares our TTFT overhead p90 with the best peer's.

Joins: ours by X-Request-ID (AIPerf sends it, the simulator records it); GuideLLM by the
response id it keeps (the simulator's response id is its ground-truth ``request_id``);
SGLang and vLLM record neither an id nor a send time per request, so their requests are
joined by prompt length: every prompt here has a distinct token count, and the n-th shortest
request a client reports is the n-th shortest the server received in that run.

Peers live in their own virtual environments under ``~/.cache/inferlab-bench/peers/<tool>/``
(a ``READY`` file marks one that has run against the simulator); a missing one is skipped
with a message. GuideLLM pulls torch: install ``torch==2.13.0`` (the CPU wheel) first.

    python benchmarks/peers.py                      # every client, every load, 3 repeats
    python benchmarks/peers.py --repeats 1 --load c1 c4 --clients ours guidellm
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from synthetic import write_population

from inferlab_bench.case.connections import ConnectionChoice, ConnectionPolicy, with_preconnect
from inferlab_bench.case.local import aiperf_environment
from inferlab_bench.case.usage import BookkeepingPolicy, UsageSampler, choose_bookkeeping
from inferlab_bench.layout import cache_root
from inferlab_bench.runs.demo import TOKENIZER_DIR

OUTPUT_TOKENS = 64
MODEL = "sim-model"
PEERS = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inferlab-bench/peers"
METRICS = ("ttft", "itl", "e2e")
BOOKKEEPING = os.environ.get("PEERS_BOOKKEEPING")  # equal, nice or idle; unset: as the stage
PRECONNECT = os.environ.get("PEERS_PRECONNECT", "1") == "1"  # 0: AIPerf connects in request


@dataclass(frozen=True)
class Load:
    key: str
    requests: int
    concurrency: int | None = None
    rate: float | None = None


LOADS = {
    "c1": Load("c1", 20, concurrency=1),
    "c4": Load("c4", 32, concurrency=4),
    "c16": Load("c16", 64, concurrency=16),
    "p4": Load("p4", 32, rate=4.0),
}


@dataclass(frozen=True)
class Measured:
    """One request as a client reported it (ms), with the key that joins it to the truth."""

    key: str | int
    ttft: float
    itl: float
    e2e: float


def prompts(n: int) -> list[str]:
    """Strictly longer prompt after prompt (the join by length needs distinct counts)."""
    return [
        f"Request {i}: describe a harbour at dawn." + " Add one detail." * (4 + i) for i in range(n)
    ]


# --- the simulator ------------------------------------------------------------------------


class Simulator:
    """``inferlab-bench simulate`` in its own process; ground truth read back per run."""

    def __init__(self, workdir: Path) -> None:
        self.truth_path = workdir / "truth.jsonl"
        command = [sys.executable, "-m", "inferlab_bench", "simulate", "--port", "0"]
        command += ["--tokenizer", TOKENIZER_DIR, "--ground-truth", str(self.truth_path)]
        command += ["--model", MODEL]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:
            found = re.search(r"http://127\.0\.0\.1:\d+", line)
            if found:
                self.url = found.group(0)
                return
        raise SystemExit("the simulator did not start")

    def lines(self) -> int:
        return len(self.truth_path.read_bytes().splitlines()) if self.truth_path.exists() else 0

    def truth_since(self, offset: int) -> list[dict[str, Any]]:
        rows = [orjson.loads(x) for x in self.truth_path.read_bytes().splitlines()[offset:] if x]
        return [r for r in rows if r.get("kind") == "request" and r.get("status") == 200]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def truth_ms(t: dict[str, Any]) -> dict[str, float]:
    n = t["completion_tokens"]
    first = t["first_token_ns"]
    return {
        "ttft": (first - t["arrival_ns"]) / 1e6,
        "itl": (t["last_token_ns"] - first) / 1e6 / max(n - 1, 1),
        "e2e": (t["end_ns"] - t["arrival_ns"]) / 1e6,
    }


# --- the clients ----------------------------------------------------------------------------


def run_quiet(command: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} exited {done.returncode}: see {log}")


def ours(url: str, load: Load, texts: list[str], work: Path) -> tuple[str, list[Measured]]:
    population = work / "population.jsonl"
    write_population(population, texts, OUTPUT_TOKENS)
    if load.rate is None:
        profiling = {"type": "concurrency", "concurrency": load.concurrency}
    else:
        profiling = {"type": "poisson", "rate": load.rate}
    body = {"ignore_eos": True, "n": 1, "stream_options": {"include_usage": True}}
    config = {
        "schemaVersion": "2.0",
        "randomSeed": 1,
        "benchmark": {
            "model": MODEL,
            "endpoint": {
                "url": url,
                "path": "/v1/chat/completions",
                "type": "chat",
                "streaming": True,
                "timeout": 300,
                "useServerTokenCount": True,
                "extra": body,
            },
            "dataset": {
                "type": "file",
                "path": str(population),
                "format": "mooncake_trace",
                "entries": len(texts),
                "sampling": "sequential",
            },
            "profiling": profiling | {"requests": len(texts)},
            "tokenizer": {"name": TOKENIZER_DIR},
            "runtime": {"ui": "none"},
            "gpuTelemetry": {"enabled": False},
            "serverMetrics": {"enabled": False},
            "artifacts": {"dir": str(work / "out"), "prefix": "p", "records": ["jsonl"]},
        },
    }
    (work / "aiperf.json").write_text(json.dumps(config))
    env = aiperf_environment(os.environ, cache_root())
    if PRECONNECT:  # as the case stage does for a pooled server
        pooled = ConnectionChoice(ConnectionPolicy.POOLED, "peers.py")
        env |= with_preconnect(pooled, url, load.concurrency).env
    command = [sys.executable, "-m", "aiperf", "profile", "--config", str(work / "aiperf.json")]
    with (work / "client.log").open("w") as log:  # as our runner starts it
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        sampler = UsageSampler(process.pid, policy=bookkeeping(load)).start()
        process.wait()
        sampler.stop()
    if process.returncode != 0:
        raise RuntimeError(f"aiperf exited {process.returncode}: see {work / 'client.log'}")
    rows = [orjson.loads(x) for x in (work / "out" / "p.jsonl").read_bytes().splitlines() if x]
    out = []
    for row in rows:
        meta, m = row["metadata"], row.get("metrics", {})
        if meta["benchmark_phase"] != "profiling" or row.get("error"):
            continue
        out.append(
            Measured(
                meta["x_request_id"],
                m["time_to_first_token"]["value"],
                m["inter_token_latency"]["value"],
                m["request_latency"]["value"],
            )
        )
    return "x_request_id", out


def bookkeeping(load: Load) -> BookkeepingPolicy:
    """PEERS_BOOKKEEPING (equal, nice, idle) for an A/B; unset, what the case stage chooses."""
    chosen = BOOKKEEPING or choose_bookkeeping(os.cpu_count() or 1, load.concurrency)
    if chosen not in ("equal", "nice", "idle"):
        raise SystemExit(f"PEERS_BOOKKEEPING={chosen}: expected equal, nice or idle")
    return chosen  # type: ignore[return-value]


def guidellm(url: str, load: Load, texts: list[str], work: Path) -> tuple[str, list[Measured]]:
    data = work / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps({"prompt": t, "output_tokens_count": OUTPUT_TOKENS}) + "\n" for t in texts
        )
    )
    if load.rate is None:
        profile: dict[str, Any] = {"kind": "concurrent", "streams": [load.concurrency]}
    else:
        profile = {"kind": "poisson", "rate": [load.rate]}
    backend = {"kind": "openai_http", "target": url, "model": MODEL}
    backend |= {"request_format": "/v1/chat/completions", "extras": {"body": {"ignore_eos": True}}}
    scenario = {
        "spec": {
            "backend": backend,
            "profile": profile,
            "data": [{"kind": "json_file", "path": str(data)}],
            "constraints": [{"kind": "max_requests", "count": len(texts)}],
            "tokenizer": {"kind": "hf_auto", "model": TOKENIZER_DIR},
            "outputs": [{"kind": "json", "path": str(work / "guidellm.json")}],
        }
    }
    (work / "scenario.json").write_text(json.dumps(scenario))
    command = [
        str(PEERS / "guidellm/bin/guidellm"),
        "run",
        "--scenario",
        str(work / "scenario.json"),
    ]
    run_quiet(command + ["--disable-console"], work / "client.log")
    found = json.loads((work / "guidellm.json").read_text())["benchmarks"][0]["requests"]
    out = []
    for r in found["successful"]:
        t = r["info"]["timings"]
        n = r["output_metrics"]["text_tokens"]
        first, last = t["first_token_iteration"], t["last_token_iteration"]
        out.append(
            Measured(
                r["response_id"],
                (first - t["request_start"]) * 1e3,
                (last - first) * 1e3 / max(n - 1, 1),
                (t["request_end"] - t["request_start"]) * 1e3,
            )
        )
    return "request_id", out


def sglang(url: str, load: Load, texts: list[str], work: Path) -> tuple[str, list[Measured]]:
    data = work / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "conversations": [
                        {"role": "user", "content": t},
                        {"role": "assistant", "content": "ok"},
                    ]
                }
            )
            + "\n"
            for t in texts
        )
    )
    command = [str(PEERS / "sglang/bin/python"), "-m", "sglang.bench_serving"]
    command += ["--backend", "sglang-oai-chat", "--base-url", url, "--model", MODEL]
    command += [
        "--tokenizer",
        TOKENIZER_DIR,
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(data),
    ]
    command += ["--num-prompts", str(len(texts)), "--sharegpt-output-len", str(OUTPUT_TOKENS)]
    command += ["--output-file", str(work / "sglang.jsonl"), "--output-details", "--disable-tqdm"]
    command += ["--extra-request-body", json.dumps({"ignore_eos": True}), "--seed", "1"]
    if load.rate is None:
        command += ["--request-rate", "inf", "--max-concurrency", str(load.concurrency)]
    else:
        command += ["--request-rate", str(load.rate)]
    run_quiet(command, work / "client.log")
    found = json.loads((work / "sglang.jsonl").read_text().splitlines()[-1])
    return "prompt_rank", _per_request_lists(found, found["input_lens"])


def vllm(url: str, load: Load, texts: list[str], work: Path) -> tuple[str, list[Measured]]:
    data = work / "data.jsonl"
    data.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in texts))
    command = [str(PEERS / "vllm/bin/vllm"), "bench", "serve", "--backend", "openai-chat"]
    command += ["--base-url", url, "--endpoint", "/v1/chat/completions", "--model", MODEL]
    command += [
        "--tokenizer",
        TOKENIZER_DIR,
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(data),
    ]
    command += ["--custom-output-len", str(OUTPUT_TOKENS), "--num-prompts", str(len(texts))]
    command += ["--ignore-eos", "--save-result", "--save-detailed", "--result-dir", str(work)]
    command += ["--result-filename", "vllm.json", "--seed", "1", "--disable-tqdm"]
    if load.rate is None:
        command += ["--request-rate", "inf", "--max-concurrency", str(load.concurrency)]
    else:
        command += ["--request-rate", str(load.rate)]
    run_quiet(command, work / "client.log")
    found = json.loads((work / "vllm.json").read_text())
    return "prompt_rank", _per_request_lists(found, found["input_lens"])


def _per_request_lists(found: dict[str, Any], keys: list[int]) -> list[Measured]:
    """SGLang's and vLLM's detailed output: parallel lists, times in seconds."""
    out = []
    for i, key in enumerate(keys):
        if found["errors"][i] or not found["ttfts"][i]:
            continue
        ttft, itls = found["ttfts"][i], found["itls"][i]
        itl = sum(itls) / len(itls) if itls else 0.0
        out.append(Measured(key, ttft * 1e3, itl * 1e3, (ttft + sum(itls)) * 1e3))
    return out


Client = Callable[[str, Load, list[str], Path], tuple[str, list[Measured]]]
CLIENTS: dict[str, tuple[Client, Path | None]] = {
    "ours": (ours, None),
    "guidellm": (guidellm, PEERS / "guidellm/bin/guidellm"),
    "sglang": (sglang, PEERS / "sglang/bin/python"),
    "vllm": (vllm, PEERS / "vllm/bin/vllm"),
}


# --- joining and summarising ----------------------------------------------------------------


def overheads(kind: str, measured: list[Measured], truth: list[dict[str, Any]]) -> dict[str, Any]:
    """Per metric, client minus truth per joined request (ms)."""
    if kind == "prompt_rank":
        # A client's own warm-up request (SGLang sends one) repeats a prompt: keep the last.
        latest = {t["prompt_tokens"]: t for t in sorted(truth, key=lambda t: t["arrival_ns"])}
        by_len = [latest[k] for k in sorted(latest)]
        ordered = sorted(measured, key=lambda m: int(m.key))
        if len(by_len) != len(ordered):
            return {}
        pairs = list(zip(ordered, by_len, strict=True))
    else:
        index = {t.get(kind): t for t in truth}
        pairs = [(m, index[m.key]) for m in measured if m.key in index]
    diffs: dict[str, Any] = {name: [] for name in METRICS}
    for m, t in pairs:
        true = truth_ms(t)
        for name in METRICS:
            diffs[name].append(getattr(m, name) - true[name])
    return {name: np.array(v) for name, v in diffs.items()} | {"n": len(pairs)}


@dataclass(frozen=True)
class RunFigures:
    client: str
    load: str
    n: int
    figures: dict[str, tuple[float, float, float]]  # metric -> (p50, p90, max) of overhead
    rps: float = 0.0  # achieved: the server's requests over its first arrival to last end


def summarise(client: str, load: str, diffs: dict[str, Any]) -> RunFigures | None:
    if not diffs or diffs["n"] == 0:
        return None
    figures = {
        name: (
            float(np.percentile(diffs[name], 50)),
            float(np.percentile(diffs[name], 90)),
            float(np.max(diffs[name])),
        )
        for name in METRICS
    }
    return RunFigures(client, load, diffs["n"], figures)


def render(runs: list[RunFigures], loads: list[str], clients: list[str]) -> str:
    head = f"{'load':<6}{'client':<10}{'runs':>5}{'n':>5}"
    for name in METRICS:
        head += f"  {name.upper() + ' p50 / p90 / max ms (spread of p90)':>44}"
    head += f"  {'req/s':>6}"
    lines = [head, "-" * len(head)]
    for load in loads:
        for client in clients:
            mine = [r for r in runs if r.load == load and r.client == client]
            if not mine:
                continue
            row = f"{load:<6}{client:<10}{len(mine):>5}{statistics.median(r.n for r in mine):>5.0f}"
            for name in METRICS:
                p50, p90, top = (
                    statistics.median(r.figures[name][i] for r in mine) for i in range(3)
                )
                p90s = [r.figures[name][1] for r in mine]
                cell = f"{p50:.2f} / {p90:.2f} / {top:.2f} ({min(p90s):.2f}-{max(p90s):.2f})"
                row += f"  {cell:>44}"
            row += f"  {statistics.median(r.rps for r in mine):>6.2f}"
            lines.append(row)
    return "\n".join(lines)


def final_line(runs: list[RunFigures]) -> str:
    parts = []
    for load in ("c1", "c4"):
        p90 = {
            client: statistics.median(
                r.figures["ttft"][1] for r in runs if r.load == load and r.client == client
            )
            for client in {r.client for r in runs if r.load == load}
        }
        peers = [v for c, v in p90.items() if not c.startswith("ours")]
        if "ours" not in p90 or not peers:
            parts.append(f"{load} n/a")
            continue
        best = min(peers)
        parts.append(f"{load} {p90['ours'] / best:.2f}" if best > 0 else f"{load} n/a")
    return "TTFT overhead p90, ours / best peer: " + " ".join(parts)


def available(clients: list[str]) -> list[str]:
    usable = []
    for name in clients:
        path = CLIENTS[name][1]
        if path is not None and not path.exists():
            print(f"skipped {name}: not installed ({path} is missing)", file=sys.stderr)
            continue
        usable.append(name)
    return usable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", nargs="+", choices=list(LOADS), default=list(LOADS))
    parser.add_argument("--clients", nargs="+", choices=list(CLIENTS), default=list(CLIENTS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, help="keep every run's files here")
    args = parser.parse_args()
    clients = available(args.clients)
    runs: list[RunFigures] = []
    with contextlib.ExitStack() as stack:
        tmp = args.workdir or stack.enter_context(tempfile.TemporaryDirectory(prefix="peers-"))
        sim = Simulator(Path(tmp))
        try:
            for key in args.load:
                load = LOADS[key]
                texts = prompts(load.requests)
                for i in range(args.repeats):
                    order = clients[i % len(clients) :] + clients[: i % len(clients)]
                    for client in order:  # interleaved, and each repeat starts elsewhere
                        runs += run_one(sim, client, load, texts, Path(tmp) / f"{key}-{client}-{i}")
        finally:
            sim.stop()
    print(render(runs, args.load, clients))
    print(final_line(runs))


def run_one(
    sim: Simulator, client: str, load: Load, texts: list[str], work: Path
) -> list[RunFigures]:
    work.mkdir(parents=True)
    offset = sim.lines()
    started = time.monotonic()
    try:
        kind, measured = CLIENTS[client][0](sim.url, load, texts, work)
    except (RuntimeError, OSError, KeyError, ValueError, IndexError) as exc:
        print(f"{load.key} {client}: failed ({exc})", file=sys.stderr, flush=True)
        return []
    time.sleep(0.2)  # the last truth line is flushed before the last byte, but be sure
    truth = sim.truth_since(offset)
    figures = summarise(client, load.key, overheads(kind, measured, truth))
    if figures is not None and truth:
        span = max(t["end_ns"] for t in truth) - min(t["arrival_ns"] for t in truth)
        figures = dataclasses.replace(figures, rps=len(truth) / max(span / 1e9, 1e-9))
    if figures is None:
        print(f"{load.key} {client}: nothing joined", file=sys.stderr, flush=True)
        return []
    if client != "ours":
        with contextlib.suppress(OSError):
            (PEERS / client / "READY").write_text(
                f"ran against inferlab-bench simulate at {time.ctime()}\n"
            )
    ttft = figures.figures["ttft"]
    print(
        f"{load.key} {client}: {figures.n} joined, TTFT overhead p50 {ttft[0]:.2f} "
        f"p90 {ttft[1]:.2f} ms, {figures.rps:.2f} req/s ({time.monotonic() - started:.0f} s)",
        file=sys.stderr,
        flush=True,
    )
    return [figures]


if __name__ == "__main__":
    main()

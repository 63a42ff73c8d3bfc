"""Peer clients side by side against one simulator: per-request error against its ground truth.

Our client as users run it (``ours-run``: ``inferlab-bench run`` with its flags, as typed;
``ours-case``: ``inferlab-bench case`` on the JSON request a control plane sends), our client
through this script's own AIPerf harness (``ours``: AIPerf with our plugin and environment,
the switches of docs/case.md's "What we change in AIPerf" each on), GuideLLM (``guidellm run``
with a scenario file), SGLang's ``bench_serving`` and vLLM's ``bench serve`` send the same
population at the same loads (c=1, c=4, c=16 and a poisson rate) to one ``inferlab-bench
simulate`` process. The population comes from ``inferlab-bench prepare``: hand-written prompts
of distinct lengths (``synthetic``) and real ShareGPT conversations (``real``, from
/work/shared/tools/real-sharegpt); the peers send each entry's last user message. Each
request a client measured is joined to the server's ground-truth record, and its TTFT, ITL
and end-to-end latency minus the truth's (the client's overhead, in ms) is summarised per
load and client over every request of its runs (p50, p90, max), with the lowest and highest
per-run p90 beside it, and the count of late requests (TTFT overhead above ``LATE_MS``); a
second table says when in each run the late ones fell. Each load runs ``--repeats`` times
with the clients interleaved (each repeat starts with the next client). The last lines
compare ``ours-run``'s pooled TTFT overhead p90 with the best peer's, and with the harness's,
at every load that ran, with a bootstrap 90% interval of the ratio and whether the two clients'
per-run p90s overlap. The load average is printed at the start and after each population.

At a rate load the clients draw their own schedules, so after the table each run's arrivals
at the server (its joined requests) are judged by the rate and dispersion checks our case
verdict applies to AIPerf (``validity.dispatch``): achieved rate within its band of the
target, inter-arrival CV near the shape's (1 for poisson). A client that fails them did not
send the asked load, and its row compares no common load with ours.

Joins: ours by X-Request-ID (AIPerf sends it, the simulator records it); GuideLLM by the
response id it keeps (the simulator's response id is its ground-truth ``request_id``);
SGLang and vLLM record neither an id nor a send time per request, so their requests are
joined by prompt length: the n-th shortest request a client reports is the n-th shortest the
server received in that run, prompts of equal length (the real population has them) in the
order the client lists them and the server received them (exact for the synthetic
population, whose prompts all differ in length, and at c=1; a run whose counts do not line
up, after SGLang's warm-up request, is reported as nothing joined).

Peers live in their own virtual environments under ``~/.cache/inferlab-bench/peers/<tool>/``
(a ``READY`` file marks one that has run against the simulator); a missing one is skipped
with a message. ``scripts/install_peers.sh`` builds them, every package pinned in
``scripts/peers/<tool>.txt`` (GuideLLM 0.8.1, SGLang 0.5.9's bench_serving, vLLM 0.33.0's
``bench serve``, torch the 2.13.0 CPU wheel; the versions move the figures).

    python benchmarks/peers.py                      # every client, load and population
    python benchmarks/peers.py --load c1 c4 --clients ours-run ours --population real
    python benchmarks/peers.py --load c1 c4 --requests 100 --population synthetic \
        --clients ours ours-spin ours-no-preconnect ours-aiperf-start ours-equal

The arms (not in the default set) are the harness with one switch off: ``ours-spin``
(AIPerf's own polling strategy), ``ours-no-preconnect`` (connections opened inside the first
requests), ``ours-aiperf-start`` (AIPerf's start stamp, before aiohttp's own work),
``ours-equal`` (bookkeeping services at the sender's priority), ``ours-two-workers`` and
``ours-own-session`` (AIPerf in a session of its own, as before 2026-12-06).
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

from inferlab_bench.case.aiperf_plugin import switches
from inferlab_bench.case.aiperf_plugin.priorities import (
    BookkeepingPolicy,
    BookkeepingPriorities,
    choose_bookkeeping,
)
from inferlab_bench.case.connections import ConnectionChoice, ConnectionPolicy
from inferlab_bench.case.local import aiperf_environment
from inferlab_bench.case.usage import UsageSampler
from inferlab_bench.layout import cache_root
from inferlab_bench.runs.demo import TOKENIZER_DIR
from inferlab_bench.validity.dispatch import (
    DispatchTolerances,
    achieved_rate,
    cv_check,
    interarrival_cv,
    rate_check,
)
from inferlab_bench.validity.verdict import Verdict, combine_checks

OUTPUT_TOKENS = 64  # per request, unless --output-tokens
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


LOADS = {  # requests per run: 3 runs pooled put 60 (c=1) and 72 (c=4) requests above the p90
    "c1": Load("c1", 200, concurrency=1),
    "c4": Load("c4", 240, concurrency=4),
    "c16": Load("c16", 256, concurrency=16),
    "p4": Load("p4", 200, rate=4.0),
}
LATE_MS = 0.8
"""A request whose TTFT overhead exceeds this is late: counted per run, with when it fell."""
BOOTSTRAP = 2000  # resamples for the interval of a pooled p90 and of the ratio


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
        workdir.mkdir(parents=True, exist_ok=True)
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


OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
"""For the peers: their tokenizer is a local directory, and SGLang's client otherwise retries
the hub for the model's config for half a minute before it starts (no network here)."""


def run_quiet(command: list[str], log: Path, ok: tuple[int, ...] = (0,)) -> None:
    env = os.environ | OFFLINE
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode not in ok:
        raise RuntimeError(f"{command[0]} exited {done.returncode}: see {log}")


@dataclass(frozen=True)
class Workload:
    """What every client sends: a population ``inferlab-bench prepare`` wrote, and its prompts.

    ``population`` has ``prepare-request.json`` beside it (``inferlab-bench run`` reads it);
    ``texts`` are its entries' last user messages, for the peers, which send one prompt each.
    """

    name: str
    population: Path
    texts: list[str]
    output_tokens: int = OUTPUT_TOKENS

    def head(self, load: Load, path: Path) -> Path:
        """The population's first ``load.requests`` entries (the ones every client sends)."""
        lines = self.population.read_bytes().splitlines(keepends=True)[: load.requests]
        path.write_bytes(b"".join(lines))
        return path


def prepared(
    kind: str, entries: int, workdir: Path, output_tokens: int = OUTPUT_TOKENS
) -> Workload:
    """A population of ``entries`` through ``inferlab-bench prepare``: hand-written prompts
    (``synthetic``, input up to 2048 tokens) or real ShareGPT conversations (``real``, input
    up to 512 tokens, from /work/shared/tools/real-sharegpt)."""
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / f"population-{kind}"
    if kind == "real":
        found = subprocess.run([REAL_SHAREGPT], capture_output=True, text=True, check=True)
        source, limit = Path(found.stdout.strip()), 512
    else:
        source, limit = workdir / "synthetic-sharegpt.json", 2048
        conversations = [
            {"id": f"synthetic-{i}", "conversations": [HUMAN | {"value": t}, GPT]}
            for i, t in enumerate(prompts(entries))
        ]
        source.write_text(json.dumps(conversations))
    command = [sys.executable, "-m", "inferlab_bench", "prepare", "--model", TOKENIZER_DIR]
    command += ["--served-name", MODEL, "--dataset", str(source), "--entries", str(entries)]
    command += ["--max-input-tokens", str(limit), "--output-tokens", str(output_tokens)]
    command += ["--seed", "1", "--out", str(out)]
    run_quiet(command, workdir / f"prepare-{kind}.log")
    population = out / "population.jsonl"
    texts = []
    for line in population.read_bytes().splitlines():
        users = [m["content"] for m in orjson.loads(line)["messages"] if m["role"] == "user"]
        texts.append(users[-1])
    return Workload(kind, population, texts, output_tokens)


REAL_SHAREGPT = "/work/shared/tools/real-sharegpt"
HUMAN = {"from": "human"}
GPT = {"from": "gpt", "value": "Fine."}


def ours(url: str, load: Load, workload: Workload, work: Path) -> tuple[str, list[Measured]]:
    """AIPerf through this script's own harness, with every switch the case stage sets."""
    return _ours(url, load, workload, work, Arm())


@dataclass(frozen=True)
class Arm:
    """One setting of each switch our case stage makes to AIPerf (docs/case.md's table)."""

    wire_start: bool = True
    preconnect: bool = PRECONNECT
    credit_wait: bool = True
    workers: int = 0
    own_session: bool = False
    bookkeeping: BookkeepingPolicy | None = None  # None: as the case stage chooses


ARMS = {  # the harness with one switch off (an A/B of that switch against ``ours``)
    "ours-aiperf-start": Arm(wire_start=False),
    "ours-no-preconnect": Arm(preconnect=False),
    "ours-spin": Arm(credit_wait=False),
    "ours-equal": Arm(bookkeeping="equal"),
    "ours-two-workers": Arm(workers=2),
    "ours-own-session": Arm(own_session=True),
}


def _arm(name: str) -> Client:
    def client(url: str, load: Load, workload: Workload, work: Path) -> tuple[str, list[Measured]]:
        return _ours(url, load, workload, work, ARMS[name])

    return client


def _ours(
    url: str, load: Load, workload: Workload, work: Path, arm: Arm
) -> tuple[str, list[Measured]]:
    population = workload.head(load, work / "population.jsonl")
    if load.rate is None:
        profiling: dict[str, Any] = {"type": "concurrency", "concurrency": load.concurrency}
    else:
        profiling = {"type": "poisson", "rate": load.rate}
    if arm.credit_wait:  # our strategy, named as the case stage names it
        profiling["timingMode"] = switches.CREDIT_WAIT_TIMING_MODE
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
                "transport": switches.TRANSPORT,
            },
            "dataset": {
                "type": "file",
                "path": str(population),
                "format": "mooncake_trace",
                "entries": load.requests,
                "sampling": "sequential",
            },
            "profiling": profiling | {"requests": load.requests},
            "tokenizer": {"name": TOKENIZER_DIR},
            "runtime": {"ui": "none"} | ({"workers": arm.workers} if arm.workers else {}),
            "gpuTelemetry": {"enabled": False},
            "serverMetrics": {"enabled": False},
            "artifacts": {"dir": str(work / "out"), "prefix": "p", "records": ["jsonl"]},
        },
    }
    (work / "aiperf.json").write_text(json.dumps(config))
    env = aiperf_environment(os.environ, cache_root())
    pooled = ConnectionChoice(ConnectionPolicy.POOLED, "peers.py")
    if arm.preconnect:  # as the case stage does for a pooled server
        env |= switches.with_preconnect(pooled, url, load.concurrency).env
    if arm.wire_start:  # as the case stage does for a pooled server
        env |= switches.with_wire_start(pooled).env
    command = [sys.executable, "-m", "aiperf", "profile", "--config", str(work / "aiperf.json")]
    with (work / "client.log").open("w") as log:  # as our runner starts it
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            process_group=None if arm.own_session else 0,
            start_new_session=arm.own_session,
        )
        lowered = BookkeepingPriorities(process.pid, arm.bookkeeping or bookkeeping(load))
        sampler = UsageSampler(
            process.pid, on_scan=lowered.lower_new, nice=lowered.sampler_nice
        ).start()
        process.wait()
        sampler.stop()
    if process.returncode != 0:
        raise RuntimeError(f"aiperf exited {process.returncode}: see {work / 'client.log'}")
    return "x_request_id", read_ours(work / "out" / "p.jsonl")


def ours_run(url: str, load: Load, workload: Workload, work: Path) -> tuple[str, list[Measured]]:
    """``inferlab-bench run`` as a user types it (its defaults, its own output directory)."""
    shape = ["--concurrency", str(load.concurrency)] if load.rate is None else []
    shape = shape or ["--rate", str(load.rate)]
    command = [sys.executable, "-m", "inferlab_bench", "run", *shape, "--url", url]
    command += ["--model", MODEL, "--tokenizer", TOKENIZER_DIR]
    command += ["--population", str(workload.population), "--requests", str(load.requests)]
    command += ["--out", str(work / "run")]
    run_quiet(command, work / "client.log")
    return "x_request_id", read_ours(_one(work / "run", "profile.jsonl"))


def ours_case(url: str, load: Load, workload: Workload, work: Path) -> tuple[str, list[Measured]]:
    """``inferlab-bench case`` as a control plane sends it: the JSON request that an
    ``ours-run`` run of this load and population saved, with an artifact directory of its own."""
    made = sorted(work.parent.glob(f"{load.key}-{workload.name}-ours-run-*/run/request.json"))
    if not made:
        raise RuntimeError("ours-case replays ours-run's request.json: list ours-run before it")
    request = orjson.loads(made[0].read_bytes())
    request["artifact_dir"] = str(work / "case")
    (work / "request.json").write_bytes(orjson.dumps(request))
    command = [
        sys.executable,
        "-m",
        "inferlab_bench",
        "case",
        "--input",
        str(work / "request.json"),
    ]
    command += ["--output", str(work / "result.json")]
    run_quiet(command, work / "client.log")
    if orjson.loads((work / "result.json").read_bytes())["status"] != "succeeded":
        raise RuntimeError(f"the case failed: see {work / 'result.json'}")
    return "x_request_id", read_ours(_one(work / "case", "profile.jsonl"))


def _one(directory: Path, name: str) -> Path:
    found = sorted(directory.rglob(name))
    if not found:
        raise RuntimeError(f"no {name} under {directory}")
    return found[0]


def read_ours(records: Path) -> list[Measured]:
    """AIPerf's profiling records that succeeded, keyed by the X-Request-ID it sent."""
    out = []
    for line in records.read_bytes().splitlines():
        row = orjson.loads(line)
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
    return out


def bookkeeping(load: Load) -> BookkeepingPolicy:
    """PEERS_BOOKKEEPING (equal, nice, idle) for an A/B; unset, what the case stage chooses."""
    chosen = BOOKKEEPING or choose_bookkeeping(os.cpu_count() or 1, load.concurrency)
    if chosen not in ("equal", "nice", "idle"):
        raise SystemExit(f"PEERS_BOOKKEEPING={chosen}: expected equal, nice or idle")
    return chosen  # type: ignore[return-value]


def guidellm(url: str, load: Load, workload: Workload, work: Path) -> tuple[str, list[Measured]]:
    texts = workload.texts[: load.requests]
    data = work / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps({"prompt": t, "output_tokens_count": workload.output_tokens}) + "\n"
            for t in texts
        )
    )
    if load.rate is None:
        profile: dict[str, Any] = {"kind": "concurrent", "streams": [load.concurrency]}
    else:
        profile = {"kind": "poisson", "rate": [load.rate]}
    backend: dict[str, Any] = {"kind": "openai_http", "target": url, "model": MODEL}
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


def sglang(url: str, load: Load, workload: Workload, work: Path) -> tuple[str, list[Measured]]:
    texts = workload.texts[: load.requests]
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
    command += ["--num-prompts", str(len(texts)), "--sharegpt-output-len"]
    command += [str(workload.output_tokens)]
    command += ["--output-file", str(work / "sglang.jsonl"), "--output-details", "--disable-tqdm"]
    command += ["--extra-request-body", json.dumps({"ignore_eos": True}), "--seed", "1"]
    if load.rate is None:
        command += ["--request-rate", "inf", "--max-concurrency", str(load.concurrency)]
    else:
        command += ["--request-rate", str(load.rate)]
    run_quiet(command, work / "client.log")
    found = json.loads((work / "sglang.jsonl").read_text().splitlines()[-1])
    return "prompt_rank", _per_request_lists(found, found["input_lens"])


def vllm(url: str, load: Load, workload: Workload, work: Path) -> tuple[str, list[Measured]]:
    texts = workload.texts[: load.requests]
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
    command += ["--custom-output-len", str(workload.output_tokens)]
    command += ["--num-prompts", str(len(texts))]
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


Client = Callable[[str, Load, Workload, Path], tuple[str, list[Measured]]]
CLIENTS: dict[str, tuple[Client, Path | None]] = {
    "ours": (ours, None),
    "ours-run": (ours_run, None),
    "ours-case": (ours_case, None),
    **{name: (_arm(name), None) for name in ARMS},
    "guidellm": (guidellm, PEERS / "guidellm/bin/guidellm"),
    "sglang": (sglang, PEERS / "sglang/bin/python"),
    "vllm": (vllm, PEERS / "vllm/bin/vllm"),
}

DEFAULT_CLIENTS = ["ours-run", "ours-case", "ours", "guidellm", "sglang", "vllm"]


# --- joining and summarising ----------------------------------------------------------------


def overheads(kind: str, measured: list[Measured], truth: list[dict[str, Any]]) -> dict[str, Any]:
    """Per metric, client minus truth per joined request (ms)."""
    if kind == "prompt_rank":
        arrived = sorted(truth, key=lambda t: t["arrival_ns"])
        if len(arrived) == len(measured) + 1:  # the client's own warm-up (SGLang sends one)
            arrived = arrived[1:]
        if len(arrived) != len(measured):
            return {}
        # Rank by prompt length; equal lengths (real prompts have them) in the order the
        # client lists its requests (its send order) and the server received them.
        by_len = sorted(arrived, key=lambda t: (t["prompt_tokens"], t["arrival_ns"]))
        ordered = sorted(measured, key=lambda m: int(m.key))  # stable: list order within ties
        pairs = list(zip(ordered, by_len, strict=True))
    else:
        index = {t.get(kind): t for t in truth}
        pairs = [(m, index[m.key]) for m in measured if m.key in index]
    diffs: dict[str, Any] = {name: [] for name in METRICS}
    for m, t in pairs:
        true = truth_ms(t)
        for name in METRICS:
            diffs[name].append(getattr(m, name) - true[name])
    arrivals = np.array(sorted(t["arrival_ns"] for _, t in pairs), dtype=np.int64)
    return {name: np.array(v) for name, v in diffs.items()} | {
        "n": len(pairs),
        "arrivals": arrivals,
        "arrival_ns": np.array([t["arrival_ns"] for _, t in pairs], dtype=np.int64),
    }


@dataclass(frozen=True)
class RunFigures:
    client: str
    load: str
    n: int
    figures: dict[str, tuple[float, float, float]]  # metric -> (p50, p90, max) of overhead
    rps: float = 0.0  # achieved: the server's requests over its first arrival to last end
    samples: dict[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)
    """Metric -> every joined request's overhead (ms), for figures pooled over runs."""
    schedule: str = ""  # at a rate load: the arrivals as our dispatch checks judge them
    late_at: tuple[float, ...] = ()
    """Seconds from the run's first arrival to each late request's (TTFT overhead > LATE_MS)."""
    span_s: float = 0.0  # the run's first arrival to its last


def judge_schedule(arrival_ns: Any, rate: float) -> str:
    """The server's arrivals of one run against a poisson ``rate``: achieved rate, CV, verdict.

    The same rate and CV checks (and tolerances) as the case verdict's
    ``load_generator_kept_up``; a schedule that fails them is not the asked load.
    """
    n, tol = len(arrival_ns), DispatchTolerances()
    achieved, cv = achieved_rate(arrival_ns), interarrival_cv(arrival_ns)
    verdict = combine_checks([rate_check(achieved, rate, 1.0, n, tol), cv_check(cv, 1.0, n, tol)])
    shown = "pass" if verdict is Verdict.PASS else verdict.value.upper()
    rate_text = "-" if achieved is None else f"{achieved:.2f}/s"
    cv_text = "-" if cv is None else f"{cv:.2f}"
    return f"{rate_text} CV {cv_text} {shown}"


def summarise(client: str, load: str, diffs: dict[str, Any]) -> RunFigures | None:
    if not diffs or diffs["n"] == 0:
        return None
    figures = {name: _p50_p90_max(diffs[name]) for name in METRICS}
    samples = {name: tuple(float(x) for x in diffs[name]) for name in METRICS}
    at = (diffs["arrival_ns"] - diffs["arrival_ns"].min()) / 1e9
    late = tuple(float(x) for x in np.sort(at[diffs["ttft"] > LATE_MS]))
    return RunFigures(
        client, load, diffs["n"], figures, samples=samples, late_at=late, span_s=float(at.max())
    )


def render_late(runs: list[RunFigures], loads: list[str], clients: list[str]) -> str:
    """Per load and client, each run's late requests: how many, and when (s into the run,
    in tenths of the run so runs of different lengths read alike)."""
    lines = [f"late requests (TTFT overhead > {LATE_MS} ms): count per run, and in which tenth"]
    for load in loads:
        for client in clients:
            for r in (r for r in runs if r.load == load and r.client == client):
                tenths = [0] * 10
                for at in r.late_at:
                    tenths[min(9, int(10 * at / max(r.span_s, 1e-9)))] += 1
                shown = " ".join(f"{x:.0f}" for x in r.late_at[:40])
                lines.append(
                    f"  {load:<5}{client:<19}{len(r.late_at):>4} of {r.n:<4} by tenth "
                    f"{tenths} of {r.span_s:.0f} s; at {shown}"
                )
    return "\n".join(lines)


def render_schedules(runs: list[RunFigures], loads: list[str], clients: list[str]) -> str:
    """Per rate load, each client's runs: the arrivals as our dispatch checks judge them."""
    lines = []
    for load in loads:
        if LOADS[load].rate is None:
            continue
        lines.append(f"{load} arrivals at the server, our rate and CV checks (target CV 1):")
        for client in clients:
            judged = [r.schedule for r in runs if r.load == load and r.client == client]
            if judged:
                lines.append(f"  {client:<19}" + "; ".join(judged))
    return "\n".join(lines)


def _p50_p90_max(values: Any) -> tuple[float, float, float]:
    return (
        float(np.percentile(values, 50)),
        float(np.percentile(values, 90)),
        float(np.max(values)),
    )


def pooled(runs: list[RunFigures], name: str) -> Any:
    """Every request's overhead of these runs in one array."""
    return np.concatenate([np.array(r.samples[name]) for r in runs])


def render(runs: list[RunFigures], loads: list[str], clients: list[str]) -> str:
    """Per load and client: p50 / p90 / max over every request of its runs (pooled), in
    brackets the lowest and highest per-run p90 (the run-to-run spread)."""
    head = f"{'load':<6}{'client':<19}{'runs':>5}{'n':>6}"
    for name in METRICS:
        head += f"  {name.upper() + ' p50 / p90 / max ms (per-run p90)':>44}"
    head += f"  {'req/s':>6}  {'late (per run)':>16}"
    lines = [head, "-" * len(head)]
    for load in loads:
        for client in clients:
            mine = [r for r in runs if r.load == load and r.client == client]
            if not mine:
                continue
            row = f"{load:<6}{client:<19}{len(mine):>5}{sum(r.n for r in mine):>6}"
            for name in METRICS:
                p50, p90, top = _p50_p90_max(pooled(mine, name))
                p90s = [r.figures[name][1] for r in mine]
                cell = f"{p50:.2f} / {p90:.2f} / {top:.2f} ({min(p90s):.2f}-{max(p90s):.2f})"
                row += f"  {cell:>44}"
            row += f"  {statistics.median(r.rps for r in mine):>6.2f}"
            late = " ".join(str(len(r.late_at)) for r in mine)
            row += f"  {sum(len(r.late_at) for r in mine):>4} ({late})"
            lines.append(row)
    return "\n".join(lines)


@dataclass(frozen=True)
class Comparison:
    """Ours against the best peer at one load: pooled TTFT overhead p90s and their ratio."""

    load: str
    peer: str
    ratio: float
    interval: tuple[float, float]  # bootstrap 90% interval of the ratio
    ours_runs: tuple[float, float]  # lowest and highest per-run p90, ours
    peer_runs: tuple[float, float]

    @property
    def runs_overlap(self) -> bool:
        return self.ours_runs[0] <= self.peer_runs[1] and self.peer_runs[0] <= self.ours_runs[1]


def compare(
    runs: list[RunFigures], load: str, mine: str, others: list[str], seed: int = 1
) -> Comparison | None:
    """``mine`` / the client of ``others`` with the lowest pooled TTFT overhead p90 at ``load``.

    The interval resamples requests within each run (so every run keeps its weight) for
    both clients alike, ``BOOTSTRAP`` times, and takes the 5th and 95th percentile of
    the ratio of the two pooled p90s.
    """
    by_client: dict[str, list[RunFigures]] = {}
    for r in runs:
        if r.load == load:
            by_client.setdefault(r.client, []).append(r)
    p90 = {c: float(np.percentile(pooled(rs, "ttft"), 90)) for c, rs in by_client.items()}
    peers = {c: v for c, v in p90.items() if c in others}
    if mine not in p90 or not peers or min(peers.values()) <= 0:
        return None
    peer = min(peers, key=peers.__getitem__)
    rng = np.random.default_rng(seed)
    ratios = [
        _resampled_p90(by_client[mine], rng) / max(_resampled_p90(by_client[peer], rng), 1e-9)
        for _ in range(BOOTSTRAP)
    ]
    low, high = (float(np.percentile(ratios, q)) for q in (5, 95))

    def spread(client: str) -> tuple[float, float]:
        values = [r.figures["ttft"][1] for r in by_client[client]]
        return min(values), max(values)

    ratio = p90[mine] / peers[peer]
    return Comparison(load, peer, ratio, (low, high), spread(mine), spread(peer))


def _resampled_p90(runs: list[RunFigures], rng: np.random.Generator) -> float:
    parts = [rng.choice(np.array(r.samples["ttft"]), size=r.n, replace=True) for r in runs]
    return float(np.percentile(np.concatenate(parts), 90))


def final_lines(runs: list[RunFigures], clients: list[str]) -> list[str]:
    """``TTFT overhead p90, ours-run / best peer: c1 X c4 Y ...`` (every load that ran) and
    what the spread allows; also ours-run / the harness (``ours``) when both ran."""
    mine = "ours-run" if "ours-run" in clients else "ours"
    peers = [c for c in clients if not c.startswith("ours")]
    lines = [final_line(runs, mine, peers, "best peer")]
    if mine != "ours" and "ours" in clients:
        lines.append(final_line(runs, mine, ["ours"], "the harness"))
    return lines


def final_line(runs: list[RunFigures], mine: str, others: list[str], label: str) -> str:
    loads = dict.fromkeys(r.load for r in runs)  # every load that ran, in the order it ran
    found = {load: compare(runs, load, mine, others) for load in loads}
    ratios = " ".join(f"{load} {c.ratio:.2f}" if c else f"{load} n/a" for load, c in found.items())
    notes = []
    for load, c in found.items():
        if c is None:
            continue
        apart = "overlap" if c.runs_overlap else "apart"
        notes.append(
            f"{load} vs {c.peer}: 90% {c.interval[0]:.2f}-{c.interval[1]:.2f}, per-run p90 "
            f"{c.ours_runs[0]:.2f}-{c.ours_runs[1]:.2f} vs "
            f"{c.peer_runs[0]:.2f}-{c.peer_runs[1]:.2f} ms {apart}"
        )
    tail = f" ({'; '.join(notes)})" if notes else ""
    return f"TTFT overhead p90, {mine} / {label}: " + ratios + tail


def available(clients: list[str]) -> list[str]:
    usable = []
    for name in clients:
        path = CLIENTS[name][1]
        if path is not None and not path.exists():
            print(
                f"skipped {name}: not installed ({path} is missing;"
                " scripts/install_peers.sh builds it)",
                file=sys.stderr,
            )
            continue
        usable.append(name)
    return usable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", nargs="+", choices=list(LOADS), default=list(LOADS))
    parser.add_argument("--clients", nargs="+", choices=list(CLIENTS), default=DEFAULT_CLIENTS)
    parser.add_argument("--population", nargs="+", choices=POPULATIONS, default=POPULATIONS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--requests", type=int, help="requests per run (default: per load)")
    parser.add_argument("--workdir", type=Path, help="keep every run's files here")
    parser.add_argument(
        "--output-tokens",
        type=int,
        default=OUTPUT_TOKENS,
        help=f"tokens per answer, every client (default {OUTPUT_TOKENS})",
    )
    args = parser.parse_args()
    clients = available(args.clients)
    loads = {k: _sized(LOADS[k], args.requests) for k in args.load}
    print(f"load average at start: {os.getloadavg()}", file=sys.stderr, flush=True)
    with contextlib.ExitStack() as stack:
        tmp = args.workdir or stack.enter_context(tempfile.TemporaryDirectory(prefix="peers-"))
        entries = max(load.requests for load in loads.values())
        for kind in args.population:
            workload = prepared(kind, entries, Path(tmp), args.output_tokens)
            runs = run_loads(Path(tmp), workload, loads, clients, args.repeats)
            print(f"\n{kind} population, load average now {os.getloadavg()}")
            print(render(runs, args.load, clients))
            print(render_late(runs, args.load, clients))
            if schedules := render_schedules(runs, args.load, clients):
                print(schedules)
            print("\n".join(final_lines(runs, clients)), flush=True)


POPULATIONS = ["synthetic", "real"]


def _sized(load: Load, requests: int | None) -> Load:
    return load if requests is None else dataclasses.replace(load, requests=requests)


def run_loads(
    tmp: Path, workload: Workload, loads: dict[str, Load], clients: list[str], repeats: int
) -> list[RunFigures]:
    """Every load, ``repeats`` times, the clients interleaved (each repeat starts elsewhere)."""
    runs: list[RunFigures] = []
    sim = Simulator(tmp / workload.name)
    try:
        for key, load in loads.items():
            for i in range(repeats):
                order = clients[i % len(clients) :] + clients[: i % len(clients)]
                for client in order:
                    work = tmp / f"{key}-{workload.name}-{client}-{i}"
                    runs += run_one(sim, client, load, workload, work)
    finally:
        sim.stop()
    return runs


def run_one(
    sim: Simulator, client: str, load: Load, workload: Workload, work: Path
) -> list[RunFigures]:
    work.mkdir(parents=True)
    offset = sim.lines()
    started = time.monotonic()
    try:
        kind, measured = CLIENTS[client][0](sim.url, load, workload, work)
    except (RuntimeError, OSError, KeyError, ValueError, IndexError) as exc:
        print(f"{load.key} {client}: failed ({exc})", file=sys.stderr, flush=True)
        return []
    time.sleep(0.2)  # the last truth line is flushed before the last byte, but be sure
    truth = sim.truth_since(offset)
    diffs = overheads(kind, measured, truth)
    figures = summarise(client, load.key, diffs)
    if figures is not None and load.rate is not None:
        figures = dataclasses.replace(
            figures, schedule=judge_schedule(diffs["arrivals"], load.rate)
        )
    if figures is not None and truth:
        span = max(t["end_ns"] for t in truth) - min(t["arrival_ns"] for t in truth)
        figures = dataclasses.replace(figures, rps=len(truth) / max(span / 1e9, 1e-9))
    if figures is None:
        print(f"{load.key} {client}: nothing joined", file=sys.stderr, flush=True)
        return []
    if not client.startswith("ours"):
        with contextlib.suppress(OSError):
            (PEERS / client / "READY").write_text(
                f"ran against inferlab-bench simulate at {time.ctime()}\n"
            )
    ttft = figures.figures["ttft"]
    print(
        f"{load.key} {client}: {figures.n} joined, TTFT overhead p50 {ttft[0]:.2f} "
        f"p90 {ttft[1]:.2f} ms, {len(figures.late_at)} late, {figures.rps:.2f} req/s"
        + (f", arrivals {figures.schedule}" if figures.schedule else "")
        + f" ({time.monotonic() - started:.0f} s)",
        file=sys.stderr,
        flush=True,
    )
    return [figures]


if __name__ == "__main__":
    main()

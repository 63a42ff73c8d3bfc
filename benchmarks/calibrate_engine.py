"""llama.cpp as a second source of truth: verdicts scored against llama-server's own timings.

``benchmarks/calibrate.py`` scores every verdict against the simulator's ground truth. This
does the same against a real engine: llama-server (built by ``tests/engine/llama_build.py``)
serving the engine tests' tiny random-weight GGUF, driven by ordinary ``inferlab-bench run``
cases under conditions whose true answer is measured:

- null: the same server, nothing done (the host loaded only by whatever else runs);
- client-side: a CPU hog on every core; AIPerf's process group braked by SIGSTOP/SIGCONT
  (``calibrate.hog`` and ``calibrate.Brake``, 40% of every 100 ms frozen);
- server-side: a queue (more requests in flight than the server has slots); a prefix cache
  left warm (the same prompts sent before, and a "reset" that does nothing).

The truth, per request: llama-server puts its own ``timings`` (``prompt_ms``,
``predicted_ms``, ``predicted_n``, ``cache_n``) in the last chunk of every stream. AIPerf's
raw export (``profile_raw.jsonl``, which the case stage always asks for) keeps every chunk
of every response with the request's X-Request-ID; its records export (``profile.jsonl``)
has the client's TTFT, ITL and E2E under the same id. Joined, per request:

- TTFT residual = client TTFT - ``prompt_ms``;
- ITL residual = client ITL - ``predicted_ms / (predicted_n - 1)``;
- E2E residual = client E2E - (``prompt_ms + predicted_ms``);
- decode residual = client E2E - TTFT - ``predicted_ms``.

A residual is what neither the model's prompt pass nor its decode spent: HTTP, the chat
template and tokenization, the wait for a slot, and whatever the client added. On a server
with a free slot the server's share is about constant, so its level in the null runs of
the same load (the median over them of each residual's p50 and p90) is taken as the
server's own share,
and a run is **distorted** when a residual percentile exceeds that null level by more than
the tolerance ``client_cost_low`` states, ``max(3 ms, 5% of the compute percentile)``
(ITL: ``max(0.5 ms, 5%)``). In a queue the wait for a slot is in the TTFT and E2E
residuals and llama.cpp reports no arrival time to take it out: there only the ITL and
decode residuals are scored. The first wave after a reset is cold when none of its first
``min(concurrency, slots)`` requests read a cached token (``cache_n``).

    PYTHONPATH=. python benchmarks/calibrate_engine.py          # 17 runs, 15-20 min
    PYTHONPATH=. python benchmarks/calibrate_engine.py --quick  # three short runs
    PYTHONPATH=. python benchmarks/calibrate_engine.py --json runs.json
    PYTHONPATH=. python benchmarks/calibrate_engine.py --report a.json b.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.calibrate import (  # noqa: E402
    READ_ON_TTST,
    WIRE,
    Brake,
    Run,
    check_rates,
    confusion,
    hog,
    jsonl,
    judge_again,
    read_check_on_ttst_alone,
    run_command,
    wire_capture,
    wire_figures,
    wire_report,
    wire_state,
)
from benchmarks.wire_truth import Capture, metric_value  # noqa: E402
from inferlab_bench.runs.demo import TOKENIZER_DIR  # noqa: E402
from inferlab_bench.validity.truth import CLIENT_TOLERANCE, ClientTolerance  # noqa: E402

METRICS = ("ttft", "itl", "e2e", "decode")
"""``decode``: client E2E - TTFT against ``predicted_ms``, the part of a request after its
first token: no wait for a slot in it, so it is what a queue leaves to score."""
SCORED = ("ttft", "itl", "e2e")
SCORED_IN_A_QUEUE = ("itl", "decode")
QUANTILES = (50, 90)
JUDGMENTS = ("client_cost_low", "cache_cold", "requests_succeeded", "verdict")
"""``load_generator_kept_up`` is not scored: llama.cpp reports no arrival time per request."""


@dataclass(frozen=True)
class Condition:
    name: str
    kind: str  # null | client | server
    load: tuple[str, ...]
    requests: int
    repeats: int
    impairment: str = "none"  # none | hog | brake
    slots: int = 4
    reset: str | None = None  # --reset-prefix-cache value
    prewarm: int = 0  # requests sent (same prompts) before the measured runs
    queued: bool = False  # more in flight than slots: TTFT/E2E residuals hold the queue


def conditions(quick: bool) -> list[Condition]:
    c4 = ("--concurrency", "4")
    if quick:
        return [
            Condition("null c=4", "null", c4, 24, 1),
            Condition("brake 40% c=4", "client", c4, 24, 1, "brake"),
            Condition("CPU hog c=4", "client", c4, 24, 1, "hog"),
        ]
    # 10/s overran the 4 slots at load 25 (E2E p90 0.6-0.8 s) and was scored as a queue
    # (docs/calibration.md); 3/s keeps about 2 in flight there.
    p3 = ("--rate", "3")
    queue = ("--concurrency", "8")
    return [
        Condition("null c=4", "null", c4, 40, 2),
        Condition("null poisson 3/s", "null", p3, 40, 2),
        Condition("brake 40% c=4", "client", c4, 40, 3, "brake"),
        Condition("brake 40% poisson 3/s", "client", p3, 40, 2, "brake"),
        Condition("queue c=8 on 2 slots", "server", queue, 40, 2, slots=2, queued=True),
        Condition("cold cache c=4", "null", c4, 40, 2, reset="llamacpp", prewarm=4),
        Condition("warm cache c=4", "server", c4, 40, 1, reset="GET:/health", prewarm=4),
        Condition("null c=4", "null", c4, 40, 2),  # the null level from both ends of the session
        # Last: on a loaded 2-core host AIPerf's start-up under the hog takes minutes.
        Condition("CPU hog c=4", "client", c4, 40, 1, "hog"),
    ]


# --- The truth: pure, on recorded rows -------------------------------------------------


@dataclass(frozen=True)
class EngineRow:
    """One request: the client's figures and llama-server's own timings (ms)."""

    start_ns: int
    client_ttft_ms: float
    client_itl_ms: float
    client_e2e_ms: float
    prompt_ms: float
    predicted_ms: float
    predicted_n: int
    cache_n: int

    @property
    def compute(self) -> dict[str, float]:
        """What the model spent, per metric: prompt pass, one decode step, both, the decode."""
        steps = self.predicted_n - 1
        itl = self.predicted_ms / steps if steps > 0 else float("nan")
        e2e = self.prompt_ms + self.predicted_ms
        return {"ttft": self.prompt_ms, "itl": itl, "e2e": e2e, "decode": self.predicted_ms}

    @property
    def residual(self) -> dict[str, float]:
        """Client figure minus the model's compute: HTTP, template, queue, and the client."""
        client = {
            "ttft": self.client_ttft_ms,
            "itl": self.client_itl_ms,
            "e2e": self.client_e2e_ms,
            "decode": self.client_e2e_ms - self.client_ttft_ms,
        }
        return {m: client[m] - self.compute[m] for m in METRICS}


def stream_timings(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    """llama-server's ``timings`` from the last chunk carrying them in one raw record."""
    for response in reversed(raw.get("responses") or []):
        for packet in reversed(response.get("packets") or []):
            value = packet.get("value")
            if packet.get("name") != "data" or not value or value == "[DONE]":
                continue
            with contextlib.suppress(orjson.JSONDecodeError):
                chunk = orjson.loads(value)
                if isinstance(chunk, dict) and isinstance(chunk.get("timings"), dict):
                    return dict(chunk["timings"])
    return None


def engine_rows(
    client: Iterable[Mapping[str, Any]], raw: Iterable[Mapping[str, Any]]
) -> tuple[list[EngineRow], int]:
    """AIPerf's profiling records joined by X-Request-ID to the timings in its raw export;
    also how many profiling records found no timings (failed, or not joined)."""
    timings = {}
    for record in raw:
        found = stream_timings(record)
        rid = (record.get("metadata") or {}).get("x_request_id")
        if found is not None and rid:
            timings[rid] = found
    rows, missing = [], 0
    for record in client:
        meta, metrics = record.get("metadata") or {}, record.get("metrics") or {}
        if meta.get("benchmark_phase") != "profiling":
            continue
        t = timings.get(meta.get("x_request_id"))
        if t is None or record.get("error"):
            missing += 1
            continue
        rows.append(
            EngineRow(
                start_ns=int(meta.get("request_start_ns") or 0),
                client_ttft_ms=metric_value(metrics, "time_to_first_token"),
                client_itl_ms=metric_value(metrics, "inter_token_latency"),
                client_e2e_ms=metric_value(metrics, "request_latency"),
                prompt_ms=float(t.get("prompt_ms", float("nan"))),
                predicted_ms=float(t.get("predicted_ms", float("nan"))),
                predicted_n=int(t.get("predicted_n") or 0),
                cache_n=int(t.get("cache_n") or 0),
            )
        )
    return rows, missing


def residual_figures(rows: list[EngineRow]) -> dict[str, float]:
    """p50 and p90 of each residual (``ttft_p50_ms`` ...) and of the compute (``compute_...``)."""
    figures = {}
    for m in METRICS:
        residual = np.array([r.residual[m] for r in rows], dtype=np.float64)
        compute = np.array([r.compute[m] for r in rows], dtype=np.float64)
        keep = np.isfinite(residual) & np.isfinite(compute)
        for q in QUANTILES:
            found = keep.any()
            figures[f"{m}_p{q}_ms"] = float(np.percentile(residual[keep], q)) if found else np.nan
            figures[f"compute_{m}_p{q}_ms"] = (
                float(np.percentile(compute[keep], q)) if found else np.nan
            )
    return figures


def first_wave_cached(rows: list[EngineRow], wave: int) -> int:
    """Cached prompt tokens (``cache_n``) of the first ``wave`` requests by client start."""
    return sum(r.cache_n for r in sorted(rows, key=lambda r: r.start_ns)[:wave])


def null_level(runs: Iterable[Run], load: str | None = None) -> dict[str, float]:
    """The server's own share of each residual: its median over the null runs of the same
    load (``truth["load"]``), or over every null run when none has it."""
    nulls = [run.truth for run in runs if run.kind == "null"]
    alike = [t for t in nulls if load is not None and t.get("load") == load]
    nulls = alike or nulls
    keys = [f"{m}_p{q}_ms" for m in METRICS for q in QUANTILES]
    return {k: float(np.nanmedian([t[k] for t in nulls])) if nulls else float("nan") for k in keys}


def excess(truth: Mapping[str, Any], level: Mapping[str, float]) -> dict[str, float]:
    """Each scored residual percentile above the null level (ms)."""
    return {k: float(truth[k]) - level[k] for k in scored_keys(truth)}


def scored_keys(truth: Mapping[str, Any]) -> list[str]:
    metrics = SCORED_IN_A_QUEUE if truth.get("queued") else SCORED
    return [f"{m}_p{q}_ms" for m in metrics for q in QUANTILES]


def client_distorted(
    truth: Mapping[str, Any],
    level: Mapping[str, float],
    tolerance: ClientTolerance = CLIENT_TOLERANCE,
) -> bool:
    """True when a scored residual exceeds its null level by more than ``client_cost_low``'s
    tolerance: max(floor, relative x the compute percentile)."""
    for key, above in excess(truth, level).items():
        floor = tolerance.itl_floor_ms if key.startswith("itl") else tolerance.floor_ms
        allowed = max(floor, tolerance.relative * float(truth[f"compute_{key}"]))
        if above > allowed:
            return True
    return False


def rescore(runs: list[Run]) -> dict[str, dict[str, float]]:
    """Every run's true state against the null level of its load; returns the levels."""
    known = {c.name: c for c in [*conditions(quick=False), *conditions(quick=True)]}
    for run in runs:  # runs saved before these fields were recorded: from the condition table
        condition = known.get(run.condition)
        if condition is not None:
            run.truth.setdefault("load", " ".join(condition.load))
            run.truth["queued"] = bool(run.truth.get("queued") or condition.queued)
    levels: dict[str, dict[str, float]] = {}
    for run in runs:
        load = run.truth.get("load")
        level = levels.setdefault(str(load), null_level(runs, load))
        run.true_state["client_cost_low"] = client_distorted(run.truth, level)
        run.true_state.update(wire_state(run.truth))
        run.true_state["verdict"] = any(
            v for k, v in run.true_state.items() if k not in ("verdict", WIRE)
        )
    return levels


# --- Running the conditions --------------------------------------------------------------


@contextlib.contextmanager
def llama_server(workdir: Path, slots: int) -> Iterator[tuple[str, str]]:
    """llama-server with the tiny model, ``slots`` parallel sequences, no RAM prompt cache;
    yields (base URL, model id)."""
    from tests.engine import llama_build
    from tests.engine.gguf_model import write_tiny_qwen2
    from tests.engine.server import running_llama_server

    binary = llama_build.find_or_build().path
    model = workdir / "tiny-qwen3.gguf"
    if not model.exists():
        write_tiny_qwen2(model, Path(TOKENIZER_DIR))
    log = workdir / f"llama-server-{slots}.log"
    # The slot erase of --reset-prefix-cache llamacpp answers 501 without a slot save path.
    (workdir / "slots").mkdir(exist_ok=True)
    extra = ("--slot-save-path", f"{workdir / 'slots'}/")
    with running_llama_server(
        binary, model, log, parallel=slots, cache_ram_mib=0, extra=extra
    ) as server:
        yield server.base_url, server.model_id


def run_case(
    url: str, model: str, condition: Condition, out: Path, impair: bool = True, requests: int = 0
) -> tuple[float, Capture | None] | None:
    """One ``inferlab-bench run``: its seconds and its packets on the wire (None: no capture
    here), or None when it wrote no validity.json."""
    command = run_command(url, model, condition.load, requests or condition.requests, out)
    if condition.reset and impair:
        command += ["--reset-prefix-cache", condition.reset]
    started = time.monotonic()
    with wire_capture(url) as wire, hog(impair and condition.impairment == "hog"):
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        brake = Brake(proc.pid) if impair and condition.impairment == "brake" else None
        if brake:
            brake.start()
        _, err = proc.communicate()
        if brake:
            brake.done.set()
            brake.join()
    if not (out / "validity.json").is_file():
        tail = err.decode(errors="replace").strip().splitlines()[-1:]
        print(f"failed: {condition.name}: no validity.json ({' '.join(tail)})", file=sys.stderr)
        return None
    return time.monotonic() - started, wire


def score(condition: Condition, out: Path, seconds: float, wire: Capture | None = None) -> Run:
    """One run's verdicts beside its truth (its client_cost_low state is set by rescore)."""
    validity = json.loads((out / "validity.json").read_text())
    result = json.loads((out / "result.json").read_text())
    client = jsonl(out / "aiperf" / "profile.jsonl")
    raw = jsonl(out / "aiperf" / "profile_raw.jsonl")
    rows, missing = engine_rows(client, raw)
    wave = min(int(condition.load[1]) if "--concurrency" in condition.load else 1, condition.slots)
    cached = first_wave_cached(rows, wave) if condition.reset else 0
    truth: dict[str, Any] = {
        **residual_figures(rows),
        "requests": len(rows),
        "queued": condition.queued,
        "load": " ".join(condition.load),
        "first_wave_cached_tokens": cached,
        "first_wave": wave,
        "reset": condition.reset is not None,
        **wire_figures(client, raw, wire),
    }
    checks = {
        c["name"]: c["verdict"]
        for part in ("client_cost", "dispatch")
        for c in (validity.get(part) or {}).get("checks", [])
    }
    checks[READ_ON_TTST] = read_check_on_ttst_alone(out)
    cost = validity.get("client_cost") or {}
    return Run(
        condition=condition.name,
        kind=condition.kind,
        load_1min=os.getloadavg()[0],
        seconds=seconds,
        verdicts={**validity["verdicts"], "verdict": validity["verdict"]},
        checks=checks,
        truth=truth,
        true_state={
            "client_cost_low": False,  # set by rescore() against the session's null level
            "cache_cold": bool(cached > 0),
            "requests_succeeded": bool(missing or result.get("failed_requests")),
            **wire_state(truth),
        },
        runnable_per_core=cost.get("runnable_per_core"),
        metrics=result.get("metrics") or {},
    )


# --- The report ----------------------------------------------------------------------------


def report(runs: list[Run], seconds: float) -> str:
    levels = rescore(runs)
    tol = CLIENT_TOLERANCE
    lines = [
        f"llama.cpp calibration {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
        f"{len(runs)} runs, {seconds / 60:.1f} min, {os.cpu_count()} cores",
        "truth: llama-server's timings per request (AIPerf raw export, joined by X-Request-ID)",
        "residual = client - compute (TTFT - prompt_ms, ITL - predicted_ms/(n-1), "
        "E2E - prompt_ms - predicted_ms)",
        *(
            f"null level of {load} ({_level_source(runs, load)}), residual p50/p90 ms: "
            + ", ".join(
                f"{m.upper()} {lv[f'{m}_p50_ms']:.2f}/{lv[f'{m}_p90_ms']:.2f}" for m in METRICS
            )
            for load, lv in levels.items()
        ),
        "distorted: a residual p50/p90 above its load's null level by more than "
        f"max({tol.floor_ms:g} ms, {tol.relative:.0%} of compute) "
        f"(ITL max({tol.itl_floor_ms:g} ms, {tol.relative:.0%})); in a queue: ITL and decode; "
        "cache: cache_n of the first wave after a reset",
        "",
        f"  {'condition':<26}{'load1':>6}  {'compute TTFT/ITL/E2E p90':>25}"
        f"{'TTFT p50/p90 +ms':>18}{'ITL p50/p90 +ms':>17}{'E2E p50/p90 +ms':>17}"
        f"{'decode p50/p90':>17}  wave cache_n",
    ]
    for run in runs:
        t = run.truth
        compute = "/".join(f"{t[f'compute_{m}_p90_ms']:.2f}" for m in SCORED)
        level = levels[str(t.get("load"))]
        above = {k: float(t[k]) - level[k] for k in level}
        dist = "".join(
            f"{above[f'{m}_p50_ms']:>+8.2f}/{above[f'{m}_p90_ms']:<+8.2f}" for m in METRICS
        )
        wave = f"{t['first_wave']} {t['first_wave_cached_tokens']}" if t.get("reset") else "-"
        lines.append(f"  {run.condition:<26}{run.load_1min:>6.2f}  {compute:>25} {dist}  {wave}")
    for judgment in JUDGMENTS:
        lines += ["", *confusion(runs, judgment)]
        if judgment == "client_cost_low":
            lines += ["", *confusion(runs, judgment, before=True)]
            if any(READ_ON_TTST in run.checks for run in runs):
                lines += ["", *confusion(runs, judgment, on_ttst=True)]
    lines += ["", *check_rates(runs), *wire_report(runs)]
    return "\n".join(lines)


def _level_source(runs: list[Run], load: str) -> str:
    alike = any(r.kind == "null" and r.truth.get("load") == load for r in runs)
    return "median of its null runs" if alike else "no null run of this load: every null run"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three short runs")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument("--only", nargs="+", help="run only conditions whose name has these words")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep every run's folder here (with --report: judge that session's runs again)",
    )
    parser.add_argument(
        "--report", type=Path, nargs="+", help="print the tables from earlier --json files"
    )
    args = parser.parse_args()
    if args.report:
        saved = [Run(**row) for path in args.report for row in json.loads(path.read_text())]
        if args.keep:  # one session's kept folders: its runs judged by today's rule
            judge_again(saved, args.keep)
        print(report(saved, sum(r.seconds for r in saved)))
        return
    chosen = [
        c for c in conditions(args.quick) if not args.only or any(w in c.name for w in args.only)
    ]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    runs: list[Run] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="calibrate-engine-") as scratch:
        tmp = args.keep or Path(scratch)
        for i, condition in enumerate(chosen):
            work = Path(tmp) / f"cond-{i}"
            work.mkdir(parents=True)
            # A fresh server per condition: the prewarm and the slots are the condition's own.
            with llama_server(Path(tmp), condition.slots) as (url, model):
                for k in range(condition.repeats):
                    if condition.prewarm:  # before every repeat: each starts as warm
                        warm = work / f"prewarm-{k}"
                        run_case(url, model, condition, warm, False, condition.prewarm)
                    done = run_case(url, model, condition, work / f"run-{k}")
                    if done is None:
                        continue
                    seconds, wire = done
                    runs.append(score(condition, work / f"run-{k}", seconds, wire))
                    if args.json:
                        args.json.write_text(json.dumps([asdict(r) for r in runs], default=float))
                    print(
                        f"done: {condition.name} #{k + 1} ({seconds:.0f} s, "
                        f"load {runs[-1].load_1min:.2f})",
                        file=sys.stderr,
                        flush=True,
                    )
    print(report(runs, time.monotonic() - began))


if __name__ == "__main__":
    main()

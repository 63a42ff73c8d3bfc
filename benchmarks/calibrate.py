"""Every judgment scored against known truth: controlled conditions against the simulator.

Each run is an ordinary ``inferlab-bench run`` against ``inferlab-bench simulate`` (its own
process, ground truth on), under one condition whose true answer is known or measured:

- null: the same server, nothing done to it (quiet, or loaded by whatever else runs here);
- client-side: a CPU hog on every core; AIPerf's process group braked by a duty-cycled
  SIGSTOP/SIGCONT (a known share of every period frozen); a rate too high for 2 cores;
- server-side: twice the decode time; a queue (fewer running sequences than in flight); a
  prefix cache left warm (the server's reset does nothing and the prompts were sent before).

Per run, the truth is every AIPerf record joined to the server's record by X-Request-ID:
the client-added latency (client minus server, over the same requests) of TTFT, ITL and E2E
at p50 and p90, the achieved arrival rate at the server against the plan, the concurrency
the server held, the arrival lateness (server arrival minus AIPerf's credit issue, p95), the
cached tokens the first wave found. Against our simulator the case stage itself decides three
verdicts by this truth (``validity.measured``); the verdicts scored here are the calibrated
rules' own (``measured.by_proxies``), what a run against any other server gets. Each
judgment is scored against the tolerance it states (``TOLERANCES`` below): a confusion table
per verdict, then its false-alarm and miss rates with counts. Repeated runs of one condition
are also compared with each other (``compare``'s Welch test with Holm's correction,
``reproduce``'s bootstrap) to count beyond-noise calls of null differences, and against the
slower server to count detections.

    python benchmarks/calibrate.py            # every condition (about 25 min on 2 cores)
    python benchmarks/calibrate.py --quick    # three short runs (the test's mode)
    python benchmarks/calibrate.py --json out.json   # also every run's figures
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from benchmarks import wire_truth
from benchmarks.wire_truth import Capture
from inferlab_bench.case.aiperf_plugin.switches import WIRE_START_ENV_VAR
from inferlab_bench.case.records import read_records
from inferlab_bench.publish.verdict import (
    DEFAULT_SETTINGS,
    Settings,
    Side,
    judge_case,
    resampled_percentiles,
)
from inferlab_bench.runs.demo import TOKENIZER_DIR
from inferlab_bench.validity.adapter import phase_records
from inferlab_bench.validity.client_cost import SEND_CHECK, ClientUsage, assess_client_cost
from inferlab_bench.validity.trials import compare_trials
from inferlab_bench.validity.truth import (
    CLIENT_TOLERANCE,
    TruthRow,
    client_distortion,
    truth_rows,
)

MODEL = "sim"
# A server slow enough to look like a GPU: TTFT ~60 ms, ITL ~15 ms, 32 output tokens.
SERVER = ["--prefill-base-ms", "40", "--prefill-ms-per-token", "0.1", "--decode-base-ms", "15"]
INPUT_TOKENS, OUTPUT_TOKENS = 200, 32
RATE_TOLERANCE = 0.05
"""load_generator_kept_up protects: arrivals at the server within 5% of the planned rate
(rate shapes), at least 90% of the asked concurrency held at the server (concurrency)."""
HELD_TOLERANCE = 0.9
LATENESS_TOLERANCE_MS = 50.0
"""load_generator_kept_up also protects when requests reached the server: arrival lateness
(server arrival minus AIPerf's credit issue, the moment it decided to send) at most 50 ms at
p95 (``validity.truth.ARRIVAL_LATENESS_P95_MS``)."""


@dataclass(frozen=True)
class Condition:
    name: str
    kind: str  # null | client | server
    load: tuple[str, ...]
    requests: int
    repeats: int
    impairment: str = "none"  # none | hog | brake | hog+brake
    server: tuple[str, ...] = ()
    reset: bool = False
    prewarm: bool = False


def conditions(quick: bool) -> list[Condition]:
    c4 = ("--concurrency", "4")
    if quick:
        return [
            Condition("null c=4", "null", c4, 24, 1),
            Condition("brake 40% c=4", "client", c4, 24, 1, "brake"),
            Condition("2x decode c=4", "server", c4, 24, 1, server=("--decode-base-ms", "30")),
        ]
    p20 = ("--rate", "20")
    return [
        Condition("null c=4", "null", c4, 48, 5),
        Condition("null poisson 20/s", "null", p20, 80, 3),
        Condition("2x decode c=4", "server", c4, 48, 2, server=("--decode-base-ms", "30")),
        Condition(
            "queue c=8 on 2 seqs",
            "server",
            ("--concurrency", "8"),
            48,
            2,
            server=("--max-num-seqs", "2"),
        ),
        Condition("cold cache c=4", "null", c4, 48, 2, reset=True, prewarm=True),
        Condition(
            "warm cache c=4",
            "server",
            c4,
            48,
            2,
            server=("--reset-noop",),
            reset=True,
            prewarm=True,
        ),
        Condition("CPU hog c=4", "client", c4, 48, 2, "hog"),
        Condition("brake 40% c=4", "client", c4, 48, 2, "brake"),
        Condition("brake 40% poisson 20/s", "client", p20, 80, 2, "brake"),
        Condition("hog poisson 250/s", "client", ("--rate", "250"), 400, 2, "hog"),
        # Beyond noise on a loaded host: the same server twice, and twice the decode, with a
        # CPU hog on every core during each run (the hog distorts the client; both sides alike).
        # Each run after a prefix-cache reset, so that every run finds it the same (cold).
        Condition("null c=4 hog", "null", c4, 48, 6, "hog", reset=True),
        Condition(
            "2x decode c=4 hog", "server", c4, 48, 3, "hog", ("--decode-base-ms", "30"), True
        ),
    ]


@dataclass
class Run:
    condition: str
    kind: str
    load_1min: float
    seconds: float
    verdicts: dict[str, str]
    checks: dict[str, str]
    truth: dict[str, Any]
    true_state: dict[str, bool]
    runnable_per_core: float | None
    cached_prompt_tokens: int = 0
    """Over the whole run: a server's first run fills its prefix cache, later ones find it."""
    metrics: dict[str, float] = field(repr=False, default_factory=dict)
    samples: dict[str, list[float]] = field(repr=False, default_factory=dict)


class Simulator:
    """``inferlab-bench simulate`` in its own process, its ground truth read per run."""

    def __init__(self, workdir: Path, extra: tuple[str, ...]) -> None:
        self.truth = workdir / "truth.jsonl"
        command = [sys.executable, "-m", "inferlab_bench", "simulate", "--port", "0"]
        command += ["--tokenizer", TOKENIZER_DIR, "--ground-truth", str(self.truth)]
        command += ["--model", MODEL, "--reset-endpoint", "vllm", *SERVER, *extra]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if found := re.search(r"http://127\.0\.0\.1:\d+", line):
                self.url = found.group(0)
                threading.Thread(target=self._drain, daemon=True).start()
                return
        raise SystemExit("the simulator did not start")

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for _ in self.process.stdout:
            pass

    def offset(self) -> int:
        return len(self.truth.read_bytes().splitlines()) if self.truth.exists() else 0

    def rows_since(self, offset: int) -> list[dict[str, Any]]:
        lines = self.truth.read_bytes().splitlines()[offset:]
        return [r for r in map(orjson.loads, filter(None, lines)) if r.get("kind") == "request"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@contextlib.contextmanager
def hog(active: bool) -> Iterator[None]:
    """One busy process per core while the block runs."""
    procs = (
        [
            subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 1)
        ]
        if active
        else []
    )
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


class Brake(threading.Thread):
    """Freeze AIPerf's process group for ``share`` of every ``period`` s (SIGSTOP/SIGCONT)."""

    def __init__(self, parent: int, share: float = 0.4, period: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.parent, self.share, self.period = parent, share, period
        self.done = threading.Event()

    def run(self) -> None:
        group = None
        while not self.done.is_set():
            group = group or aiperf_group(self.parent)
            if group is None:
                time.sleep(0.05)
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGSTOP)
                time.sleep(self.share * self.period)
                os.killpg(group, signal.SIGCONT)
            time.sleep((1 - self.share) * self.period)
        if group is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGCONT)


def aiperf_group(parent: int) -> int | None:
    """The process group of the AIPerf child of ``parent`` (its own group), once started."""
    own = os.getpgid(parent)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[1]) == parent and int(stat[2]) != own:
                return int(stat[2])
    return None


def run_command(
    url: str,
    model: str,
    load: Sequence[str],
    requests: int,
    out: Path,
    *,
    output_tokens: int = OUTPUT_TOKENS,
    budget: int = 600,
) -> list[str]:
    """``inferlab-bench run`` of random prompts (``INPUT_TOKENS`` each) under ``load``, its
    result as JSON and its folder at ``out``: what every calibration bench runs."""
    command = [sys.executable, "-m", "inferlab_bench", "run", "--url", url, "--model", model]
    command += ["--tokenizer", TOKENIZER_DIR, "--random-input-tokens", str(INPUT_TOKENS)]
    command += ["--random-output-tokens", str(output_tokens), *load]
    command += ["--requests", str(requests), "--out", str(out), "--json"]
    return [*command, "--budget", str(budget)]


def run_case(
    sim: Simulator, condition: Condition, out: Path, impair: bool = True
) -> tuple[Path, list[dict[str, Any]], float, Capture | None] | None:
    """One run under the condition: its folder, the server's truth rows, its seconds and its
    packets on the wire (None: no capture here); None when the case failed (said on stderr,
    not scored)."""
    command = run_command(sim.url, MODEL, condition.load, condition.requests, out, budget=900)
    if condition.reset:
        command += ["--reset-prefix-cache", "vllm"]
    offset = sim.offset()
    started = time.monotonic()
    with wire_capture(sim.url) as wire, hog(impair and "hog" in condition.impairment):
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        brake = Brake(proc.pid) if impair and "brake" in condition.impairment else None
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
    time.sleep(0.2)
    return out, sim.rows_since(offset), time.monotonic() - started, wire


def score(
    condition: Condition,
    out: Path,
    server: list[dict[str, Any]],
    seconds: float,
    wire: Capture | None = None,
) -> Run:
    validity = json.loads((out / "validity.json").read_text())
    result = json.loads((out / "result.json").read_text())
    client = [
        r
        for r in jsonl(out / "aiperf" / "profile.jsonl")
        if r["metadata"]["benchmark_phase"] == "profiling"
    ]
    rows = truth_rows(client, server, from_client_start=started_at_first_byte(out))
    distortion = client_distortion(rows)
    load = load_truth(condition, rows, validity)
    load.update(lateness_truth(client, server))
    load["beyond_tolerance"] = bool(
        load["beyond_tolerance"] or load["arrival_late_p95_ms"] > LATENESS_TOLERANCE_MS
    )
    cache = cache_truth(rows, condition)
    cost = validity.get("client_cost") or {}
    checks = {
        c["name"]: c["verdict"]
        for part in ("client_cost", "dispatch")
        for c in (validity.get(part) or {}).get("checks", [])
    }
    # Against our simulator the truth decided; the checks a run elsewhere gets are kept here.
    measured = validity.get("measured") or {}
    checks.update({c["name"]: c["verdict"] for c in measured.get("proxy_checks", [])})
    checks[READ_ON_TTST] = read_check_on_ttst_alone(out)
    raw = jsonl(out / "aiperf" / "profile_raw.jsonl")
    truth = {
        **distortion.figures(),
        **load,
        "first_wave_cached_tokens": cache,
        **wire_figures(client, raw, wire),
    }
    true_state = {
        "client_cost_low": distortion.beyond_tolerance,
        "load_generator_kept_up": load["beyond_tolerance"],
        "cache_cold": bool(cache > 0),
        "requests_succeeded": bool(any(r.status != 200 for r in rows) or len(rows) < len(client)),
    }
    true_state["verdict"] = any(true_state.values())
    true_state.update(wire_state(truth))
    return Run(
        condition=condition.name,
        kind=condition.kind,
        load_1min=os.getloadavg()[0],
        seconds=seconds,
        # Against our simulator the verdicts are decided by its truth; the calibrated rules'
        # own verdicts (what a run elsewhere gets) are kept beside them: those are scored.
        verdicts={
            **validity["verdicts"],
            **(validity.get("measured") or {}).get("by_proxies", {}),
            "verdict": validity["verdict"],
        },
        checks=checks,
        truth=truth,
        true_state=true_state,
        runnable_per_core=cost.get("runnable_per_core"),
        cached_prompt_tokens=sum(r.cached_tokens for r in rows),
        metrics=result.get("metrics") or {},
        samples={
            "ttft_ms": [r.client_ttft_ms for r in rows],
            "tpot_ms": [r.client_itl_ms for r in rows],
            "request_latency_ms": [r.client_e2e_ms for r in rows],
        },
    )


def jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSON-lines file (AIPerf's exports)."""
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def started_at_first_byte(out: Path) -> bool:
    """Whether the run in ``out`` took each request's start at its first byte written (the
    case stage records the switch in connections.json)."""
    env = json.loads((out / "connections.json").read_text()).get("aiperf_environment") or {}
    return bool(env.get(WIRE_START_ENV_VAR) == "1")


def load_truth(
    condition: Condition, rows: list[TruthRow], validity: dict[str, Any]
) -> dict[str, Any]:
    """What the server saw of the load: its arrival rate against the plan, or concurrency held."""
    arrivals = np.sort([r.arrival_ns for r in rows]).astype(np.float64)
    ends = np.asarray([r.end_ns for r in rows], dtype=np.float64)
    if "--rate" in condition.load:
        planned = float(condition.load[condition.load.index("--rate") + 1])
        achieved = (len(arrivals) - 1) / ((arrivals[-1] - arrivals[0]) / 1e9)
        # The rate's own sampling error (CV 1 / sqrt(n - 1), 3 sigmas) is no distortion.
        band = max(RATE_TOLERANCE, 3.0 / np.sqrt(len(arrivals) - 1))
        error = achieved / planned - 1.0
        return {
            "server_rate": float(achieved),
            "rate_error": float(error),
            "beyond_tolerance": bool(abs(error) > band),
        }
    asked = int(condition.load[condition.load.index("--concurrency") + 1])
    starts = np.asarray([r.arrival_ns for r in rows], dtype=np.float64)
    lo, hi = arrivals[asked - 1], arrivals[-1]
    overlap = np.clip(np.minimum(ends, hi) - np.maximum(starts, lo), 0, None)
    held = float(overlap.sum() / (hi - lo)) / asked
    return {"server_held_ratio": held, "beyond_tolerance": bool(held < HELD_TOLERANCE)}


def lateness_truth(client: list[dict[str, Any]], server: list[dict[str, Any]]) -> dict[str, float]:
    """Server arrival minus AIPerf's credit issue per request (ms), p50 / p95 / max, beside
    the client's own estimate (request start minus credit issue, its dispatch delay)."""
    by_id = {s.get("x_request_id"): s for s in server if s.get("x_request_id")}
    late, delay = [], []
    for record in client:
        meta = record["metadata"]
        truth = by_id.get(meta.get("x_request_id"))
        issued = meta.get("credit_issued_ns")
        if truth is None or issued is None:
            continue
        late.append((truth["arrival_ns"] - issued) / 1e6)
        delay.append((meta["request_start_ns"] - issued) / 1e6)
    if not late:
        return {"arrival_late_p95_ms": float("nan")}
    return {
        "arrival_late_p50_ms": float(np.percentile(late, 50)),
        "arrival_late_p95_ms": float(np.percentile(late, 95)),
        "arrival_late_max_ms": float(np.max(late)),
        "dispatch_delay_p95_ms": float(np.percentile(delay, 95)),
    }


def cache_truth(rows: list[TruthRow], condition: Condition) -> int:
    """Cached prompt tokens the first wave found (after a reset that worked: none)."""
    if not condition.reset:
        return 0
    wave = int(condition.load[condition.load.index("--concurrency") + 1])
    first = sorted(rows, key=lambda r: r.arrival_ns)[:wave]
    return sum(r.cached_tokens for r in first)


JUDGMENTS = (
    "client_cost_low",
    "load_generator_kept_up",
    "cache_cold",
    "requests_succeeded",
    "verdict",
)


READ_ON_TTST = "read_late_on_ttst_alone"
"""The read-late check as it was until bursts were counted (one ITL at most)."""


def read_check_on_ttst_alone(out: Path) -> str:
    """``first_token_read_late_p90_ms`` of the run in ``out`` judged without its chunk gaps."""
    columns = read_records(out / "aiperf" / "profile.jsonl").profiling
    phase = dataclasses.replace(phase_records(columns), first_burst_ms=None)
    read = next(c for c in assess_client_cost(phase, None).checks if c.name.startswith("first"))
    return read.verdict.value


def judged_today(out: Path) -> tuple[str, dict[str, str]]:
    """``client_cost_low`` and its checks of the run kept in ``out``, judged by today's rule
    (its records, the client's sampled usage and how its start was taken, as it ran)."""
    columns = read_records(out / "aiperf" / "profile.jsonl").profiling
    sampled = json.loads((out / "client-usage.json").read_text())
    usage = ClientUsage(
        time_ns=tuple(sampled["time_ns"]),
        cpu_seconds=tuple(sampled["cpu_seconds"]),
        runnable=tuple(sampled["runnable"]),
        host_cores=int(sampled["host_cores"]),
        server_on_this_host=True,
        start_at_first_byte=started_at_first_byte(out),
    )
    cost = assess_client_cost(phase_records(columns), usage)
    return cost.client_cost_low.value, {c.name: c.verdict.value for c in cost.checks}


def judge_again(runs: list[Run], keep: Path) -> None:
    """The runs of one session judged by today's client_cost_low, from the folders its
    ``--keep`` left (in the order they were scored)."""
    conditions = sorted(keep.glob("cond-*"), key=lambda p: int(p.name.split("-")[1]))
    folders = [
        run
        for condition in conditions
        for run in sorted(condition.glob("run-*"), key=lambda p: int(p.name.split("-")[1]))
        if (run / "validity.json").is_file()
    ]
    for run, out in zip(runs, folders, strict=True):
        run.verdicts["client_cost_low"], today = judged_today(out)
        run.checks = {**run.checks, **today}


def rule_on_ttst(run: Run) -> str:
    """client_cost_low without bursts: the read check on TTST alone and no stream-stall check
    (the rule until 2026-12-07 12:00)."""
    names = ("client_cpu_ms_per_request", "send_time_p95_ms", READ_ON_TTST)
    said = [run.checks[name] for name in names if name in run.checks]
    if "fail" in said:
        return "fail"
    return "pass" if all(v == "pass" for v in said) else "unknown"


def rule_before(run: Run) -> str:
    """client_cost_low as judged until this calibration: CPU per request, send time and the
    run queue (no read-late check)."""
    names = ("client_cpu_ms_per_request", "send_time_p95_ms")
    old = [run.checks[name] for name in names if name in run.checks]
    if "fail" in old or (run.runnable_per_core or 0.0) > 1.0:
        return "fail"
    return "pass" if all(v == "pass" for v in old) else "unknown"


def confusion(
    runs: list[Run],
    judgment: str,
    before: bool = False,
    on_ttst: bool = False,
    state: str | None = None,
) -> list[str]:
    """``judgment``'s verdicts against the true state ``state`` (by default its own)."""
    label = " (rule before calibration)" if before else " (without bursts: TTST alone, no stall)"
    state = state or judgment
    runs = [run for run in runs if state in run.true_state]
    lines = [
        f"{judgment}{label if before or on_ttst else ''}"
        f"{' against the wire' if state == WIRE else ''}",
        f"  {'condition':<26}{'load1':>6}  {'true state':<12}verdict",
    ]
    alarms = misses = nulls = positives = 0
    for run in runs:
        if judgment == "client_cost_low" and before:
            said = rule_before(run)
        elif judgment == "client_cost_low" and on_ttst:
            said = rule_on_ttst(run)
        else:
            said = run.verdicts.get(judgment, "absent")
        bad = run.true_state[state]
        lines.append(
            f"  {run.condition:<26}{run.load_1min:>6.2f}  "
            f"{'distorted' if bad else 'within tol':<12}{said}"
        )
        if said not in ("pass", "fail"):
            continue
        if bad:
            positives += 1
            misses += said == "pass"
        else:
            nulls += 1
            alarms += said == "fail"
    lines.append(
        f"  false alarms {alarms}/{nulls} ({_rate(alarms, nulls)}), "
        f"misses {misses}/{positives} ({_rate(misses, positives)})"
    )
    return lines


CLIENT_CHECKS = (
    "client_cpu_ms_per_request",
    "send_time_p95_ms",
    SEND_CHECK,
    "first_token_read_late_p90_ms",
    READ_ON_TTST,
    "stream_read_stall_p90_ms",
    "dispatch_delay_p95_ms",
)


def check_rates(runs: list[Run], state: str = "client_cost_low") -> list[str]:
    """Each check alone against the client-added latency's truth: which ones carry the verdict."""
    against = " on the wire" if state == WIRE else ""
    lines = [f"each check alone against client-added latency{against} (false alarms, misses)"]
    for check in CLIENT_CHECKS:
        said = [
            (run.checks.get(check), run.true_state[state])
            for run in runs
            if state in run.true_state
        ]
        judged = [(v, bad) for v, bad in said if v in ("pass", "fail")]
        alarms = sum(v == "fail" and not bad for v, bad in judged)
        misses = sum(v == "pass" and bad for v, bad in judged)
        nulls = sum(not bad for _, bad in judged)
        positives = len(judged) - nulls
        lines.append(f"  {check:<30} false alarms {alarms}/{nulls}, misses {misses}/{positives}")
    return lines


WIRE = "client_cost_low_wire"
"""The true state of ``client_cost_low`` measured on the wire (``benchmarks/wire_truth.py``)."""


@contextlib.contextmanager
def wire_capture(url: str) -> Iterator[Capture | None]:
    """The loopback packets of ``url``'s port while the block runs; None where capture is not
    permitted (CAP_NET_RAW), said once."""
    try:
        with wire_truth.capture(int(url.rsplit(":", 1)[1].split("/")[0])) as found:
            yield found
    except PermissionError:
        if not getattr(wire_capture, "said", False):
            print("no wire truth: capturing loopback packets needs CAP_NET_RAW", file=sys.stderr)
            wire_capture.said = True  # type: ignore[attr-defined]
        yield None


def wire_figures(
    client: list[dict[str, Any]], raw: list[dict[str, Any]], wire: Capture | None
) -> dict[str, Any]:
    """What the client added, on the wire (``wire_ttft_p90_ms`` ...); {} without a capture."""
    if wire is None:
        return {}
    rows, missing = wire_truth.wire_rows(client, raw, wire_truth.wire_requests(wire.packets))
    return {
        **wire_truth.added_figures(rows),
        "wire_joined": len(rows),
        "wire_missing": missing,
        "wire_dropped": wire.dropped,
    }


def wire_state(truth: dict[str, Any]) -> dict[str, bool]:
    """``{WIRE: distorted}`` when the run has wire figures, else {}."""
    if not truth.get("wire_joined"):
        return {}
    return {WIRE: wire_truth.beyond_tolerance(truth)}


def wire_report(runs: list[Run]) -> list[str]:
    """The client-added latency on the wire per run, and the verdict and checks against it."""
    wired = [run for run in runs if WIRE in run.true_state]
    if not wired:
        return []
    lines = [
        "",
        "the wire's truth: client figure minus the wire's (request's first byte out -> the "
        "token's event out, plus SYN -> SYN-ACK where the request opened its connection), "
        "over the requests joined",
        f"  {'condition':<26}{'load1':>6}  {'joined':>7}  {'TTFT p50/p90 +ms':>18}"
        f"{'ITL p50/p90 +ms':>17}{'E2E p50/p90 +ms':>17}  true state",
    ]
    for run in wired:
        t = run.truth
        added = "".join(
            f"{t[f'wire_{m}_p50_ms']:>+8.2f}/{t[f'wire_{m}_p90_ms']:<+8.2f}"
            for m in ("ttft", "itl", "e2e")
        )
        joined = f"{t['wire_joined']}/{t['wire_joined'] + t['wire_missing']}"
        state = "distorted" if run.true_state[WIRE] else "within tol"
        lines.append(f"  {run.condition:<26}{run.load_1min:>6.2f}  {joined:>7} {added}  {state}")
    return [
        *lines,
        "",
        *confusion(wired, "client_cost_low", state=WIRE),
        "",
        *check_rates(wired, WIRE),
    ]


def lateness_table(runs: list[Run]) -> list[str]:
    """load_generator_kept_up beside the truth of arrival lateness, and its dispatch check."""
    lines = [
        f"load_generator_kept_up against arrival lateness (tolerance p95 <= "
        f"{LATENESS_TOLERANCE_MS:g} ms; the dispatch check: request start - credit p95 <= 50 ms)",
        f"  {'condition':<26}{'load1':>6}  {'late p50/p95/max ms':>22}  {'dispatch p95':>12}  "
        f"{'true state':<12}{'check':<8}verdict",
    ]
    for run in runs:
        t = run.truth
        if "arrival_late_p95_ms" not in t:
            continue
        late = (
            f"{t.get('arrival_late_p50_ms', float('nan')):.1f}/{t['arrival_late_p95_ms']:.1f}/"
            f"{t.get('arrival_late_max_ms', float('nan')):.1f}"
        )
        state = "distorted" if run.true_state["load_generator_kept_up"] else "within tol"
        lines.append(
            f"  {run.condition:<26}{run.load_1min:>6.2f}  {late:>22}  "
            f"{t.get('dispatch_delay_p95_ms', float('nan')):>12.1f}  {state:<12}"
            f"{run.checks.get('dispatch_delay_p95_ms', '-'):<8}"
            f"{run.verdicts.get('load_generator_kept_up', 'absent')}"
        )
    return lines


def _rate(k: int, n: int) -> str:
    return "n/a" if n == 0 else f"{k / n:.0%}"


ALT_METRICS = ("p50_tpot_ms", "p50_request_latency_ms")
"""What a 2x decode must be called slower on every time: the TPOT and E2E medians (with one
trial a side and a hog's floors, TPOT p90 needs a change beyond about 60%)."""
PAIRS_AT_MOST = 60
"""Pairs judged per setting and trial count (the 2 vs 2 pairs of 6 runs number 45)."""


def noise_calls(runs: list[Run]) -> list[str]:
    """Null pairs and 2x-decode pairs through reproduce's and compare's tests, per setting,
    without and with the run-to-run floor; and the run-to-run spread the floor is set from."""
    by: dict[str, list[Run]] = {}
    for run in runs:  # a warm prefix cache is a change, not noise: runs pair with their like
        warm = " (warm cache)" if run.cached_prompt_tokens else ""
        by.setdefault(run.condition + warm, []).append(run)
    lines = [
        "beyond noise (null: repeated runs of one condition, paired within it; "
        "2x: '2x decode X' against 'null X')",
        *run_to_run(by),
        f"  {'setting':<22}{'trials':>7}  {'floor':<7}{'load1':>11}  {'null: metrics':>16}"
        f"{'cases':>14}  2x decode: slower {'/'.join(m.split('_')[1] for m in ALT_METRICS)}",
    ]
    for name, group in by.items():
        if group[0].kind != "null" or len(group) < 2:
            continue
        slow = by.get(name.replace("null", "2x decode", 1), [])
        loads = [r.load_1min for r in group + slow]
        for trials in (1, 2):
            nulls = null_pairs(group, trials)
            alts = alt_pairs(group, slow, trials)
            for floor in (False, True):
                settings = Settings(run_floor=floor)
                metric_calls, case_calls = [0, 0], [0, 0]
                for a, b in nulls:
                    calls, judged = reproduce_calls(a, b, settings)
                    _add(metric_calls, (calls, judged))
                    _add(case_calls, (int(calls > 0), 1))
                hits = total = 0
                for a, b in alts:
                    verdict = judge_case("2x", sides(a), sides(b), settings=settings)
                    for metric in ALT_METRICS:
                        found = verdict.of(metric)
                        total += 1
                        hits += found is not None and found.verdict == "slower"
                lines.append(
                    f"  {name:<22}{trials:>3} v {trials}  {'after' if floor else 'before':<7}"
                    f"{min(loads):>5.1f}-{max(loads):<5.1f}"
                    f"{_count(metric_calls):>16}{_count(case_calls):>14}  "
                    f"{_count([hits, total]) if total else '-'}"
                )
        lines += compare_calls(name, group, slow)
    return lines


def _count(found: list[int]) -> str:
    return f"{found[0]}/{found[1]} ({_rate(*found)})"


def null_pairs(group: list[Run], trials: int) -> list[tuple[list[Run], list[Run]]]:
    """Disjoint sets of ``trials`` runs of one condition, each unordered couple once."""
    sets = list(itertools.combinations(range(len(group)), trials))
    pairs = [(a, b) for a, b in itertools.combinations(sets, 2) if not set(a) & set(b)]
    return [([group[i] for i in a], [group[i] for i in b]) for a, b in pairs[:PAIRS_AT_MOST]]


def alt_pairs(base: list[Run], slow: list[Run], trials: int) -> list[tuple[list[Run], list[Run]]]:
    left = list(itertools.combinations(base, trials))
    right = list(itertools.combinations(slow, trials))
    return [(list(a), list(b)) for a, b in itertools.product(left, right)][:PAIRS_AT_MOST]


def compare_calls(name: str, group: list[Run], slow: list[Run]) -> list[str]:
    """compare (Welch + Holm over its headline metrics; against one trial, the floor) on null
    pairs of 2 vs 2 and 1 vs 2 runs, and against 2x decode."""
    lines = []
    ones = [
        ([group[i]], list(two))
        for i in range(len(group))
        for two in itertools.combinations(group[:i] + group[i + 1 :], 2)
    ][:PAIRS_AT_MOST]
    alt_ones = [([a], list(b)) for a in slow for b in itertools.combinations(group, 2)]
    for label, nulls, alts in (
        ("2 v 2", null_pairs(group, 2), alt_pairs(group, slow, 2)),
        ("1 v 2", ones, alt_ones[:PAIRS_AT_MOST]),
    ):
        calls, cases = [0, 0], [0, 0]
        for a, b in nulls:
            noise = compare_trials([r.metrics for r in a], [r.metrics for r in b])
            beyond = sum(n.noise == "beyond_noise" for n in noise)
            _add(calls, (beyond, sum(n.noise != "unknown" for n in noise)))
            _add(cases, (int(beyond > 0), 1))
        hits = [0, 0]
        for a, b in alts:
            noise = compare_trials([r.metrics for r in a], [r.metrics for r in b])
            found = next((n for n in noise if n.metric == "p50_tpot_ms"), None)
            _add(hits, (int(found is not None and found.noise == "beyond_noise"), 1))
        if not calls[1]:
            continue
        alt = f"; 2x decode: p50_tpot_ms beyond noise {_count(hits)}" if hits[1] else ""
        lines.append(
            f"  {name:<22}  compare {label} (Welch, Holm): beyond noise {_count(calls)} "
            f"metrics, {_count(cases)} comparisons{alt}"
        )
    return lines


FAMILIES = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("request_latency_ms", "E2E"))


def run_to_run(by: dict[str, list[Run]]) -> list[str]:
    """How far one run's figures move from run to run with nothing changed: per family, the
    relative sd over runs of p50/p90/p99, and the part of it beyond the request-to-request
    spread (each run's own bootstrap), which a one-trial side cannot show."""
    lines = [
        "  run-to-run spread, relative sd over runs of p50/p90/p99 (beyond the "
        "request-to-request part), output throughput"
    ]
    rng = np.random.default_rng(0)
    for name, group in by.items():
        if group[0].kind != "null" or len(group) < 3:
            continue
        cells = []
        for column, label in FAMILIES:
            parts = []
            for q in (50, 90, 99):
                values = [np.asarray(r.samples[column], dtype=np.float64) for r in group]
                values = [v[np.isfinite(v)] for v in values]
                stats = np.asarray([np.percentile(v, q) for v in values])
                total = float(np.std(stats, ddof=1) / np.mean(stats))
                within = float(
                    np.mean(
                        [
                            np.std(resampled_percentiles(v, q, 400, rng)) / np.percentile(v, q)
                            for v in values
                        ]
                    )
                )
                beyond = math.sqrt(max(0.0, total**2 - within**2))
                parts.append(f"{total:.1%}({beyond:.1%})")
            cells.append(f"{label} {'/'.join(parts)}")
        tput = [r.metrics.get("output_throughput", math.nan) for r in group]
        cells.append(f"tput {float(np.std(tput, ddof=1) / np.mean(tput)):.1%}")
        lines.append(f"    {name:<22}{len(group):>2} runs  " + "  ".join(cells))
    return lines


def _add(total: list[int], found: tuple[int, int]) -> None:
    total[0] += found[0]
    total[1] += found[1]


def sides(runs: list[Run]) -> Side:
    samples = tuple(
        {k: np.asarray(v, dtype=np.float64) for k, v in run.samples.items()} for run in runs
    )
    return Side(metrics=tuple(run.metrics for run in runs), samples=samples)


def reproduce_calls(
    a: list[Run], b: list[Run], settings: Settings = DEFAULT_SETTINGS
) -> tuple[int, int]:
    verdict = judge_case("null", sides(a), sides(b), settings=settings)
    judged = [m for m in verdict.metrics if m.verdict != "not comparable"]
    return sum(m.verdict in ("faster", "slower") for m in judged), len(judged)


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
    parser.add_argument("--repeats", type=int, help="runs of each chosen condition (its own)")
    parser.add_argument(
        "--report",
        type=Path,
        nargs="+",
        help="print the tables from --json files of earlier sessions instead of running",
    )
    args = parser.parse_args()
    if args.report:
        saved = [Run(**row) for path in args.report for row in json.loads(path.read_text())]
        if args.keep:
            judge_again(saved, args.keep)
        print(report(saved, sum(r.seconds for r in saved)))
        return
    chosen = [
        c for c in conditions(args.quick) if not args.only or any(w in c.name for w in args.only)
    ]
    if args.repeats:
        chosen = [dataclasses.replace(c, repeats=args.repeats) for c in chosen]
    # A stop (SIGTERM) unwinds like Ctrl-C: the simulator and the hogs are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    runs: list[Run] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="calibrate-") as scratch:
        tmp = args.keep or Path(scratch)
        for i, condition in enumerate(chosen):
            work = Path(tmp) / f"cond-{i}"
            work.mkdir(parents=True)
            sim = Simulator(work, condition.server)
            try:
                if condition.prewarm:
                    run_case(sim, condition, work / "prewarm", impair=False)
                for k in range(condition.repeats):
                    done = run_case(sim, condition, work / f"run-{k}")
                    if done is None:
                        continue
                    out, server, seconds, wire = done
                    runs.append(score(condition, out, server, seconds, wire))
                    if args.json:  # after every run: a long session interrupted keeps its runs
                        args.json.write_text(json.dumps([asdict(r) for r in runs], default=float))
                    print(
                        f"done: {condition.name} #{k + 1} ({seconds:.0f} s, "
                        f"load {runs[-1].load_1min:.2f})",
                        file=sys.stderr,
                        flush=True,
                    )
            finally:
                sim.stop()
    print(report(runs, time.monotonic() - began))


def client_state(run: Run) -> bool:
    """Client-added latency beyond ``CLIENT_TOLERANCE``, from a run's figures (truth
    percentile = client percentile - added, over the same requests)."""
    for metric, column in (("ttft", "ttft_ms"), ("itl", "tpot_ms"), ("e2e", "request_latency_ms")):
        values = np.asarray(run.samples[column], dtype=np.float64)
        values = values[np.isfinite(values)]
        floor = CLIENT_TOLERANCE.itl_floor_ms if metric == "itl" else CLIENT_TOLERANCE.floor_ms
        for q in (50, 90):
            added = run.truth[f"{metric}_p{q}_ms"]
            truth = float(np.percentile(values, q)) - added
            if added > max(floor, CLIENT_TOLERANCE.relative * truth):
                return True
    return False


def report(runs: list[Run], seconds: float) -> str:
    tol = CLIENT_TOLERANCE
    for run in runs:  # judged against today's tolerance, whenever the run was made
        run.true_state["client_cost_low"] = client_state(run)
        run.true_state["verdict"] = any(
            v for k, v in run.true_state.items() if k not in ("verdict", WIRE)
        )
    lines = [
        f"calibration {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {len(runs)} runs, "
        f"{seconds / 60:.1f} min, {os.cpu_count()} cores",
        f"tolerances: client-added TTFT/E2E p50,p90 <= max({tol.floor_ms:g} ms, "
        f"{tol.relative:.0%}), ITL p50,p90 <= max({tol.itl_floor_ms:g} ms, {tol.relative:.0%}); "
        f"server arrival rate within max(5%, 3/sqrt(n-1)); held concurrency >= 90%; "
        "no cached tokens in the first wave after a reset",
        "",
        f"  {'condition':<26}{'load1':>6}  {'TTFT p50/p90 +ms':>18}{'ITL p50/p90 +ms':>17}"
        f"{'E2E p50/p90 +ms':>17}  {'rate/held':>9}  runq/core",
    ]
    for run in runs:
        t = run.truth
        dist = "".join(
            f"{t[f'{m}_p50_ms']:>+8.2f}/{t[f'{m}_p90_ms']:<+8.2f}" for m in ("ttft", "itl", "e2e")
        )
        rate = t.get("rate_error", t.get("server_held_ratio"))
        runq = "-" if run.runnable_per_core is None else f"{run.runnable_per_core:.2f}"
        lines.append(f"  {run.condition:<26}{run.load_1min:>6.2f}  {dist} {rate:>+9.3f}  {runq}")
    for judgment in JUDGMENTS:
        lines += ["", *confusion(runs, judgment)]
        if judgment == "client_cost_low":
            lines += ["", *confusion(runs, judgment, before=True)]
            if any(READ_ON_TTST in run.checks for run in runs):
                lines += ["", *confusion(runs, judgment, on_ttst=True)]
    lines += ["", *lateness_table(runs), "", *check_rates(runs), *wire_report(runs)]
    lines += ["", *noise_calls(runs)]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

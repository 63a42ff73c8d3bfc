"""Peers' result files as the published side: ``vllm bench serve --save-result`` JSON and
GuideLLM's ``benchmarks.json``, mapped onto our metric names (lenient: only what we use).

What maps (docs/reproduce.md has the table): TTFT, TPOT (vLLM's per-request TPOT and
GuideLLM's per-request inter-token latency are both AIPerf's per-request inter_token_latency:
(E2E - TTFT) / (output tokens - 1)), E2E, output and request throughput, goodput (vLLM with
``--goodput``). vLLM's ITL pools every token gap of every request and has no counterpart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from inferlab_bench.errors import BaselineError, BundleError
from inferlab_bench.load import Load
from inferlab_bench.publish import comparable
from inferlab_bench.publish.comparable import Identity
from inferlab_bench.publish.contents import case_groups
from inferlab_bench.publish.verdict import (
    DEFAULT_SETTINGS,
    CaseVerdict,
    Settings,
    Side,
    judge_case,
)
from inferlab_bench.report.rundir import SavedCase, load_case, load_trials

VLLM = "vllm bench serve"
GUIDELLM = "guidellm"
_VLLM_STATS = (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("e2el", "request_latency_ms"))
_VLLM_UNMAPPED = ("itl", "ITL pools every token gap of all requests; AIPerf's is per request")


@dataclass(frozen=True)
class BaselineCase:
    """One benchmark of a peer's file, in our names."""

    label: str
    metrics: dict[str, float]
    samples: dict[str, npt.NDArray[np.float64]] | None
    model: str | None
    requests: int | None
    unmapped: tuple[str, ...] = ()

    def side(self) -> Side:
        return Side((self.metrics,), () if self.samples is None else (self.samples,))

    def identity(self) -> Identity:
        return Identity(
            served_name=self.model,
            tokenizer_fingerprint=None,
            population_sha256=None,
            load=self.label,
            requests=None,  # a peer's count is noted, not held against it
            warmup=None,
            verdicts={},
            failed=False,
        )


@dataclass(frozen=True)
class Baseline:
    tool: str
    version: str | None
    path: Path
    cases: tuple[BaselineCase, ...]

    def case(self, label: str) -> BaselineCase | None:
        return next((c for c in self.cases if c.label == label), None)


def judge_against(
    baseline: Baseline, cases: Sequence[Sequence[SavedCase]], settings: Settings = DEFAULT_SETTINGS
) -> tuple[CaseVerdict, ...]:
    """Each of our cases (its trials) against the peer's benchmark at the same load."""
    verdicts = []
    for trials in cases:
        ours = comparable.identity(trials, None)
        peer = baseline.case(ours.load or "")
        if peer is None:
            have = ", ".join(c.label for c in baseline.cases)
            verdicts.append(
                judge_case(
                    ours.load or "?",
                    Side(()),
                    comparable.side(trials),
                    not_comparable=[
                        f"{baseline.path.name} has no benchmark at {ours.load} ({have})"
                    ],
                    settings=settings,
                )
            )
            continue
        verdicts.append(
            judge_case(
                peer.label,
                peer.side(),
                comparable.side(trials),
                not_comparable=comparable.differences(peer.identity(), ours),
                caveats=_caveats(baseline, peer, trials),
                settings=settings,
            )
        )
    return tuple(verdicts)


def our_cases(path: Path) -> list[tuple[SavedCase, ...]]:
    """Our side of a comparison: each case of a run, sweep or trials folder, with its trials."""
    if path.is_file():
        return [(load_case(path),)]
    try:
        groups = case_groups(path)
    except BundleError as exc:
        raise BaselineError(exc.message, hint=exc.hint) from exc
    return [
        load_trials(g.directory) if len(g.trials) > 1 else (load_case(g.trials[0]),) for g in groups
    ]


def _caveats(baseline: Baseline, peer: BaselineCase, trials: Sequence[SavedCase]) -> list[str]:
    request = trials[0].request
    out = [f"published side: {baseline.tool} {baseline.version or ''}".rstrip()]
    if request is not None and request.population is not None:
        out.append(f"{baseline.tool} sent its own prompts, not our population")
    if request is not None and peer.requests not in (None, request.case.request_count):
        out.append(
            f"request count: {baseline.tool} {peer.requests}, ours {request.case.request_count}"
        )
    out += [f"not mapped: {u}" for u in peer.unmapped]
    return out


def baseline_document(baseline: Baseline) -> dict[str, Any]:
    return {
        "tool": baseline.tool,
        "version": baseline.version,
        "path": str(baseline.path),
        "cases": [
            {
                "label": c.label,
                "model": c.model,
                "requests": c.requests,
                "metrics": c.metrics,
                "unmapped": list(c.unmapped),
            }
            for c in baseline.cases
        ],
    }


def peer_kind(path: Path) -> str | None:
    """Which peer wrote ``path`` (None when it is not one of theirs)."""
    if not path.is_file() or path.name.endswith(".tar.gz"):
        return None
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return _kind(data)


def load_baseline(path: Path) -> Baseline:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise BaselineError(f"{path}: cannot read as JSON ({exc})") from exc
    kind = _kind(data)
    if kind == VLLM:
        return Baseline(VLLM, None, path, (_vllm_case(path, data),))  # it records no version
    if kind == GUIDELLM:
        version = (data.get("metadata") or {}).get("guidellm_version")
        benchmarks = data.get("benchmarks") or []
        cases = tuple(_guidellm_case(path, i, b) for i, b in enumerate(benchmarks))
        return Baseline(GUIDELLM, version, path, cases)
    raise BaselineError(
        f"{path}: neither a `vllm bench serve --save-result` file nor a GuideLLM benchmarks.json",
        hint="pass the JSON those tools wrote, or a run directory of ours",
    )


def _kind(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("benchmarks"), list) and "metadata" in data:
        return GUIDELLM
    if "median_ttft_ms" in data and "output_throughput" in data:
        return VLLM
    return None


# --- vLLM ---------------------------------------------------------------------------------


def _vllm_case(path: Path, data: dict[str, Any]) -> BaselineCase:
    metrics: dict[str, float] = {}
    for short, ours in _VLLM_STATS:
        _put(metrics, f"mean_{ours}", data.get(f"mean_{short}_ms"))
        _put(metrics, f"p50_{ours}", data.get(f"median_{short}_ms"))
        for q in (90, 95, 99):
            _put(metrics, f"p{q}_{ours}", data.get(f"p{q}_{short}_ms"))
    for theirs, ours in (
        ("output_throughput", "output_throughput"),
        ("request_throughput", "request_throughput"),
        ("total_token_throughput", "total_token_throughput"),
        ("request_goodput", "goodput"),
    ):
        _put(metrics, ours, data.get(theirs))
    if not metrics:
        raise BaselineError(f"{path}: no metric of a vLLM result file found")
    return BaselineCase(
        label=_vllm_label(data),
        metrics=metrics,
        samples=_vllm_samples(data),
        model=data.get("model_id"),
        requests=data.get("completed"),
        unmapped=(f"itl ({_VLLM_UNMAPPED[1]})",),
    )


def _vllm_label(data: dict[str, Any]) -> str:
    concurrency = data.get("max_concurrency")
    rate = data.get("request_rate")
    if isinstance(concurrency, int) and concurrency > 0:
        return Load.at_concurrency(concurrency).label
    if isinstance(rate, int | float) and math.isfinite(rate) and rate > 0:
        burstiness = data.get("burstiness")
        shaped = burstiness if isinstance(burstiness, int | float) and burstiness != 1.0 else None
        return Load.at_rate(float(rate), shaped).label
    return Load.unbounded().label


def _vllm_samples(data: dict[str, Any]) -> dict[str, npt.NDArray[np.float64]] | None:
    """Per-request values of ``--save-detailed`` (seconds) in ms; None without them.

    TPOT per request is (E2E - TTFT) / (output tokens - 1), vLLM's and AIPerf's definition.
    """
    ttfts, itls = data.get("ttfts"), data.get("itls")
    if not isinstance(ttfts, list) or not isinstance(itls, list) or len(ttfts) != len(itls):
        return None
    n = len(ttfts)
    latencies = data.get("latencies") if len(data.get("latencies") or []) == n else None
    outs = data.get("output_lens") if len(data.get("output_lens") or []) == n else None
    ok = [i for i, t in enumerate(ttfts) if isinstance(t, int | float) and t > 0]
    ttft = np.asarray([ttfts[i] for i in ok], dtype=np.float64)
    if latencies is not None:
        e2e = np.asarray([latencies[i] for i in ok], dtype=np.float64)
    else:
        e2e = ttft + np.asarray([float(np.sum(itls[i])) for i in ok])
    if outs is not None:
        tokens = np.asarray([outs[i] for i in ok], dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            tpot = np.where(tokens > 1, (e2e - ttft) / (tokens - 1), np.nan)
    else:
        tpot = np.asarray([np.mean(itls[i]) if itls[i] else np.nan for i in ok])
    return {"ttft_ms": ttft * 1000.0, "tpot_ms": tpot * 1000.0, "request_latency_ms": e2e * 1000.0}


# --- GuideLLM ------------------------------------------------------------------------------


def _guidellm_case(path: Path, index: int, benchmark: dict[str, Any]) -> BaselineCase:
    requests = ((benchmark.get("requests") or {}).get("successful")) or []
    if not requests:
        raise BaselineError(f"{path}: benchmarks[{index}] has no successful requests")
    ms = {
        "ttft_ms": [r.get("time_to_first_token_ms") for r in requests],
        "tpot_ms": [r.get("inter_token_latency_ms") for r in requests],
        "request_latency_ms": [
            None if r.get("request_latency") is None else r["request_latency"] * 1000.0
            for r in requests
        ],
    }
    samples = {k: np.asarray([np.nan if v is None else v for v in vs]) for k, vs in ms.items()}
    metrics: dict[str, float] = {}
    for column, values in samples.items():
        finite = values[np.isfinite(values)]
        if finite.size:
            for q in (50, 90, 95, 99):
                metrics[f"p{q}_{column}"] = float(np.percentile(finite, q))
            metrics[f"mean_{column}"] = float(finite.mean())
    starts = [r["request_start_time"] for r in requests if r.get("request_start_time")]
    ends = [r["request_end_time"] for r in requests if r.get("request_end_time")]
    if starts and ends and max(ends) > min(starts):
        window = max(ends) - min(starts)
        tokens = sum(int(r.get("output_tokens") or 0) for r in requests)
        metrics["output_throughput"] = tokens / window
        metrics["request_throughput"] = len(requests) / window
    config = benchmark.get("config") or {}
    return BaselineCase(
        label=_guidellm_label(config.get("strategy") or {}),
        metrics=metrics,
        samples=samples,
        model=_guidellm_model(requests[0]),
        requests=len(requests),
        unmapped=("goodput (GuideLLM's SLO attainment is not AIPerf's SLO goodput)",),
    )


def _guidellm_label(strategy: dict[str, Any]) -> str:
    kind = strategy.get("type_")
    if kind == "synchronous":
        return Load.at_concurrency(1).label
    if kind == "concurrent" and isinstance(strategy.get("streams"), int):
        return Load.at_concurrency(strategy["streams"]).label
    if kind == "poisson" and isinstance(strategy.get("rate"), int | float):
        return Load.at_rate(float(strategy["rate"])).label
    if kind == "constant" and isinstance(strategy.get("rate"), int | float):
        return f"constant {strategy['rate']:g}/s"  # evenly spaced: none of our loads
    return Load.unbounded().label if kind == "throughput" else str(kind)


def _guidellm_model(request: dict[str, Any]) -> str | None:
    try:
        body = orjson.loads(request.get("request_args") or "{}").get("body") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return None
    model = body.get("model")
    return model if isinstance(model, str) else None


def _put(metrics: dict[str, float], name: str, value: Any) -> None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        metrics[name] = float(value)

"""vLLM's serving benchmark results read as vLLM meant them: ``benchmark_serving.py`` /
``vllm bench serve --save-result`` JSON (2024 to now, nightly files trimmed to a few keys
included), ``vllm bench sweep``'s ``run=N.json`` and its ``summary.json`` (a list of runs).

Fields used: ``model_id``; the load from ``max_concurrency``, ``request_rate`` (a number,
``"inf"`` or ``Infinity``) and ``burstiness``; ``completed`` (else ``num_prompts``, the
count sent); ``{mean,median,p50,p90,p95,p99}_{ttft,tpot,e2el}_ms`` and, in files older
than ``e2el``, ``{mean,median,p99}_latency_ms``; ``output_throughput``,
``request_throughput``, ``total_token_throughput``, ``request_goodput``; with
``--save-detailed``: ``ttfts``, ``itls``, ``latencies``, ``output_lens``, ``errors``.
The figures shown are the file's own (vLLM's percentiles are numpy's linear ones, as ours).
``*_itl_ms`` pools every token gap of every request, which AIPerf does not report.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, TypeAdapter, ValidationError

from inferlab_bench.errors import BaselineError
from inferlab_bench.load import Load
from inferlab_bench.publish.peers.model import (
    MAX_REQUESTS_KEPT,
    Baseline,
    BaselineCase,
    Count,
    Figures,
    Foreign,
    Ms,
    PerSecond,
    Samples,
    Seconds,
    Text,
    parse,
    short,
)

TOOL = "vllm bench serve"
_FIGURE = re.compile(r"^(mean|median|p\d{1,2}(?:\.\d+)?)_(ttft|tpot|e2el|latency)_ms$")
_OURS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "request_latency_ms"}
_ITL = "itl (vLLM's ITL pools every token gap of all requests; AIPerf's is per request)"
_MS: TypeAdapter[float | None] = TypeAdapter(Ms | None)
Rate = Annotated[float, Field(ge=0.0)] | Literal["inf"]
Gaps = Annotated[list[Seconds], Field(max_length=1_000_000)]
Kept = Field(max_length=MAX_REQUESTS_KEPT)


class Result(Foreign):
    model_id: Text | None = None
    num_prompts: Count | None = None
    completed: Count | None = None
    request_rate: Rate | None = None
    burstiness: Annotated[float, Field(gt=0.0, le=1e6, allow_inf_nan=False)] | None = None
    max_concurrency: Count | None = None
    output_throughput: PerSecond | None = None
    request_throughput: PerSecond | None = None
    total_token_throughput: PerSecond | None = None
    request_goodput: PerSecond | None = None
    ttfts: Annotated[list[Seconds], Kept] | None = None
    itls: Annotated[list[Gaps], Kept] | None = None
    latencies: Annotated[list[Seconds], Kept] | None = None
    output_lens: Annotated[list[Count], Kept] | None = None
    errors: Annotated[list[Annotated[str, Field(max_length=65536)]], Kept] | None = None


def is_result(data: Any) -> bool:
    """A vLLM result: its TTFT keys, and none of SGLang's ``*_e2e_latency_ms``."""
    return (
        isinstance(data, dict)
        and any(k in data for k in ("median_ttft_ms", "mean_ttft_ms"))
        and not any(k in data for k in ("mean_e2e_latency_ms", "median_e2e_latency_ms"))
    )


def is_sweep_summary(data: Any) -> bool:
    return isinstance(data, list) and bool(data) and all(is_result(d) for d in data)


def read_result(path: Path, data: Any, syntax: str) -> Baseline:
    case = _case(path, [("", data)])
    kind = "vllm bench sweep run" if isinstance(data, dict) and "run_number" in data else TOOL
    return Baseline(TOOL, None, path, (case,), f"{kind} result ({syntax})")


def read_sweep_summary(path: Path, data: Any, syntax: str) -> Baseline:
    """``summary.json``: every run of a sweep; runs at one load are that case's trials."""
    if len(data) > 10_000:
        raise BaselineError(f"{path}: {len(data)} runs, more than the 10000 read")
    groups: dict[str, list[tuple[int, Any]]] = {}
    for index, record in enumerate(data):
        label = _label(parse(Result, record, path, f"[{index}]"))[0]
        groups.setdefault(label, []).append((index, record))
    cases = tuple(_case(path, [(f"[{i}]", r) for i, r in runs]) for runs in groups.values())
    return Baseline(TOOL, None, path, cases, f"vllm bench sweep summary.json ({syntax})")


def _case(path: Path, records: Sequence[tuple[str, Any]]) -> BaselineCase:
    """One load's runs, each given with where it sits in the file (``[3]`` in a summary)."""
    results = [parse(Result, r, path, where) for where, r in records]
    first = results[0]
    label, refusal = _label(first)
    refusals = [refusal] if refusal else []
    if first.completed == 0:
        refusals.append("no completed requests (completed: 0): its figures describe nothing")
    runs = tuple(
        _figures(path, record, where, result)
        for (where, record), result in zip(records, results, strict=True)
    )
    samples = [_samples(r) for r in results]
    notes = [] if len(runs) == 1 else [f"{len(runs)} runs of this load, judged as trials"]
    if first.completed is None:
        notes.append(f"the file records no completed count; {first.num_prompts} were sent")
    return BaselineCase(
        label=label,
        runs=runs,
        samples=None if any(s is None for s in samples) else tuple(s for s in samples if s),
        model=first.model_id,
        requests=first.completed if first.completed is not None else first.num_prompts,
        unmapped=(_ITL,),
        refusals=tuple(refusals),
        notes=tuple(notes),
    )


def _label(result: Result) -> tuple[str, str | None]:
    rate = result.request_rate
    finite_rate = rate if isinstance(rate, float) and math.isfinite(rate) and rate > 0 else None
    concurrency = result.max_concurrency or None
    if concurrency is not None and finite_rate is not None:
        return f"{finite_rate:g}/s capped at c={concurrency}", (
            f"a rate of {finite_rate:g}/s capped at {concurrency} in flight is none of our "
            "load shapes (ours have one or the other)"
        )
    if concurrency is not None:
        return Load.at_concurrency(concurrency).label, None
    if finite_rate is not None:
        burst = result.burstiness
        return Load.at_rate(finite_rate, burst if burst not in (None, 1.0) else None).label, None
    return Load.unbounded().label, None


def _figures(path: Path, record: Any, where: str, result: Result) -> dict[str, float]:
    """The file's own figures, each bounded; ``median`` is our p50."""
    figures = Figures()
    e2el = any(isinstance(k, str) and k.endswith("_e2el_ms") for k in record)
    for key, value in record.items():
        match = _FIGURE.match(key) if isinstance(key, str) else None
        if match is None:
            continue
        stat, metric = match.groups()
        if metric == "latency" and e2el:
            continue  # a newer file: e2el is the end-to-end latency
        name = "p50" if stat == "median" else stat
        column = _OURS.get(metric, "request_latency_ms")
        if name in ("mean", "p50", "p90", "p95", "p99"):
            figures.put(f"{name}_{column}", _ms(path, f"{where}.{key}".lstrip("."), value))
    figures.put_all(
        [
            ("output_throughput", result.output_throughput),
            ("request_throughput", result.request_throughput),
            ("total_token_throughput", result.total_token_throughput),
            ("goodput", result.request_goodput),
        ]
    )
    return figures.values


def _ms(path: Path, key: str, value: Any) -> float | None:
    try:
        checked: float | None = _MS.validate_python(value, strict=True)
        return checked
    except ValidationError as exc:
        raise BaselineError(
            f"{path}: {key}: {exc.errors()[0]['msg'].lower()}, found {short(value)}",
            hint="the file is not what its tool writes; fix or re-create it",
        ) from None


def _samples(result: Result) -> Samples | None:
    """Per-request values of ``--save-detailed`` (seconds) in ms, failed requests left out.

    TPOT per request is (E2E - TTFT) / (output tokens - 1), vLLM's and AIPerf's definition.
    """
    ttfts, itls = result.ttfts, result.itls
    if ttfts is None or itls is None or len(ttfts) != len(itls) or not ttfts:
        return None
    n = len(ttfts)
    errors = result.errors if result.errors is not None and len(result.errors) == n else None
    ok = [i for i in range(n) if ttfts[i] > 0 and (errors is None or not errors[i])]
    ttft = np.asarray([ttfts[i] for i in ok], dtype=np.float64)
    lat = result.latencies if result.latencies is not None and len(result.latencies) == n else None
    e2e = (
        np.asarray([lat[i] for i in ok], dtype=np.float64)
        if lat is not None
        else ttft + np.asarray([float(np.sum(itls[i])) for i in ok])
    )
    outs = (
        result.output_lens
        if result.output_lens is not None and len(result.output_lens) == n
        else None
    )
    tpot: npt.NDArray[np.float64]
    if outs is not None:
        tokens = np.asarray([outs[i] for i in ok], dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            tpot = np.where(tokens > 1, (e2e - ttft) / (tokens - 1), np.nan)
    else:
        tpot = np.asarray([np.mean(itls[i]) if itls[i] else np.nan for i in ok])
    return {"ttft_ms": ttft * 1000.0, "tpot_ms": tpot * 1000.0, "request_latency_ms": e2e * 1000.0}

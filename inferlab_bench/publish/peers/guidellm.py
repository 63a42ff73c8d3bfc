"""GuideLLM's benchmarks report (JSON or YAML) read as GuideLLM meant it, one reader per format
generation.

Fields used, 0.4 and later (``metadata`` + ``benchmarks[]``; 0.4.0 to 0.8.1 seen):
``metadata.guidellm_version``; per benchmark ``config.strategy`` (the load),
``config.sample_requests`` / ``config.sample_size`` (a sample of requests kept),
``config.backend.model``; ``scheduler_metrics.measure_start_time`` / ``measure_end_time``
(the measurement window: warmup and cooldown fall outside it); ``metrics.<name>.successful``
(``mean``, ``median``, ``count``, ``percentiles``) of ``time_to_first_token_ms``,
``request_latency`` (s), ``inter_token_latency_ms``, ``output_tokens_per_second`` and
``requests_per_second``; ``requests.successful[]``: ``request_start_time``,
``request_end_time``, ``time_to_first_token_ms``, ``inter_token_latency_ms``,
``request_latency``, ``output_tokens``, and the model in ``request_args``.

Fields used, 0.2 and 0.3 (no ``metadata``): ``args.strategy``, ``worker.backend_model``,
``request_samples``, the same ``metrics`` (their ITL figures weigh each request once) and
``requests.successful[]`` with ``start_time`` / ``end_time``.

The figures shown are the file's own. Where GuideLLM's own figure is not ours (from 0.4 its
ITL distribution weighs each request by its tokens; AIPerf's weighs each request once), it is
recomputed from the requests inside the measurement window, with GuideLLM's percentile rule
(the first value whose cumulative share reaches the quantile).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
import orjson
from pydantic import Field

from inferlab_bench.load import Load
from inferlab_bench.publish.peers.model import (
    MAX_RATE,
    MAX_REQUESTS_KEPT,
    Baseline,
    BaselineCase,
    Count,
    Epoch,
    Figures,
    Foreign,
    Ms,
    PerSecond,
    Samples,
    Seconds,
    Text,
    parse,
)

TOOL = "guidellm"
QUANTILES = (50, 90, 95, 99)
Stat = Annotated[float, Field(ge=0.0, le=MAX_RATE, allow_inf_nan=False)]
_GOODPUT = "goodput (GuideLLM's SLO attainment is not AIPerf's SLO goodput)"


class Summary(Foreign):
    mean: Stat
    median: Stat
    count: Count
    percentiles: Annotated[dict[str, Stat], Field(max_length=64)] = {}


class ByStatus(Foreign):
    successful: Summary | None = None


class Metrics(Foreign):
    time_to_first_token_ms: ByStatus | None = None
    inter_token_latency_ms: ByStatus | None = None
    request_latency: ByStatus | None = None
    output_tokens_per_second: ByStatus | None = None
    requests_per_second: ByStatus | None = None


class Request(Foreign):
    request_start_time: Epoch | None = None
    request_end_time: Epoch | None = None
    start_time: Epoch | None = None
    end_time: Epoch | None = None
    time_to_first_token_ms: Ms | None = None
    inter_token_latency_ms: Ms | None = None
    request_latency: Seconds | None = None
    output_tokens: Count | None = None
    request_args: Annotated[str, Field(max_length=16 * 1024 * 1024)] | None = None

    @property
    def start(self) -> float | None:
        return self.request_start_time if self.request_start_time is not None else self.start_time

    @property
    def end(self) -> float | None:
        return self.request_end_time if self.request_end_time is not None else self.end_time


class Requests(Foreign):
    successful: Annotated[list[Request], Field(max_length=MAX_REQUESTS_KEPT)] | None = None


class Strategy(Foreign):
    type_: Text
    streams: Count | None = None
    rate: PerSecond | None = None


class Backend(Foreign):
    model: Text | None = None


class Config(Foreign):
    strategy: Strategy
    sample_requests: Count | None = None
    sample_size: Count | None = None
    backend: Backend | None = None


class Window(Foreign):
    measure_start_time: Epoch
    measure_end_time: Epoch


class BenchmarkV04(Foreign):
    config: Config
    scheduler_metrics: Window | None = None
    metrics: Metrics
    requests: Requests = Requests()


class Metadata(Foreign):
    guidellm_version: Text | None = None


class ReportV04(Foreign):
    metadata: Metadata
    benchmarks: Annotated[list[BenchmarkV04], Field(max_length=10_000)]


class Args(Foreign):
    strategy: Strategy


class Worker(Foreign):
    backend_model: Text | None = None


class BenchmarkV03(Foreign):
    args: Args
    worker: Worker | None = None
    metrics: Metrics
    requests: Requests = Requests()
    request_samples: Count | None = None


class ReportV03(Foreign):
    benchmarks: Annotated[list[BenchmarkV03], Field(max_length=10_000)]


def is_v04(data: Any) -> bool:
    return (
        isinstance(data, dict) and isinstance(data.get("benchmarks"), list) and "metadata" in data
    )


def is_v03(data: Any) -> bool:
    if not isinstance(data, dict) or "metadata" in data:
        return False
    benchmarks = data.get("benchmarks")
    return (
        isinstance(benchmarks, list)
        and bool(benchmarks)
        and isinstance(benchmarks[0], dict)
        and "args" in benchmarks[0]
    )


def read_v04(path: Path, data: Any, syntax: str) -> Baseline:
    report = parse(ReportV04, data, path)
    cases = tuple(_case_v04(b) for b in report.benchmarks)
    version = report.metadata.guidellm_version
    return Baseline(TOOL, version, path, cases, f"GuideLLM 0.4+ report ({syntax})")


def read_v03(path: Path, data: Any, syntax: str) -> Baseline:
    report = parse(ReportV03, data, path)
    cases = tuple(_case_v03(b) for b in report.benchmarks)
    return Baseline(TOOL, None, path, cases, f"GuideLLM 0.2/0.3 report ({syntax})")


def percentile(values: Sequence[float] | npt.NDArray[np.float64], q: float) -> float:
    """GuideLLM's percentile: the first distinct value whose cumulative share reaches q/100
    (shares summed in floating point, as GuideLLM does)."""
    distinct, counts = np.unique(np.asarray(values, dtype=np.float64), return_counts=True)
    cdf = np.cumsum(counts / counts.sum())
    index = int(np.searchsorted(cdf, q / 100.0, side="left"))
    return float(distinct[min(index, distinct.size - 1)])


def _case_v04(benchmark: BenchmarkV04) -> BaselineCase:
    label, refusal = load_label(benchmark.config.strategy)
    ttft = _successful(benchmark.metrics.time_to_first_token_ms)
    if ttft is None or ttft.count == 0:
        return _empty(label, refusal, _model_v04(benchmark))
    everyone = benchmark.requests.successful or []
    kept = _in_window(everyone, benchmark.scheduler_metrics)
    sampled = _sample_note(benchmark.config, len(kept), ttft.count)
    figures = _own_figures(benchmark.metrics)
    notes = list(sampled)
    if benchmark.scheduler_metrics is not None and len(kept) < len(everyone):
        notes.append(
            f"measurement window: {len(kept)} of {len(everyone)} successful requests fall inside "
            "scheduler_metrics.measure_start_time..measure_end_time (warmup and cooldown "
            "excluded, as in GuideLLM's own figures)"
        )
    unmapped = [_GOODPUT, "time_per_output_token_ms (its TPOT counts the first token)"]
    itl = _successful(benchmark.metrics.inter_token_latency_ms)
    if itl is not None and itl.count == ttft.count:
        _put_summary(figures, "tpot_ms", itl, 1.0)
    elif not sampled:
        _put_recomputed(figures, "tpot_ms", [r.inter_token_latency_ms for r in kept])
        notes.append(
            "TPOT recomputed per request from the requests in the window (GuideLLM's own ITL "
            "figures weigh each request by its tokens; AIPerf's weigh each request once)"
        )
    else:
        unmapped.append("TPOT: its ITL figures weigh requests by tokens and it keeps a sample")
    return BaselineCase(
        label=label,
        runs=(figures.values,),
        samples=None if sampled else (_samples(kept),),
        model=_model_v04(benchmark),
        requests=ttft.count,
        unmapped=tuple(unmapped),
        refusals=(refusal,) if refusal else (),
        notes=tuple(notes),
    )


def _case_v03(benchmark: BenchmarkV03) -> BaselineCase:
    label, refusal = load_label(benchmark.args.strategy)
    model = benchmark.worker.backend_model if benchmark.worker else None
    ttft = _successful(benchmark.metrics.time_to_first_token_ms)
    if ttft is None or ttft.count == 0:
        return _empty(label, refusal, model)
    kept = benchmark.requests.successful or []
    figures = _own_figures(benchmark.metrics)
    itl = _successful(benchmark.metrics.inter_token_latency_ms)
    if itl is not None:
        _put_summary(figures, "tpot_ms", itl, 1.0)
    complete = len(kept) == ttft.count and benchmark.request_samples is None
    notes = () if complete else (_kept_note(len(kept), ttft.count),)
    return BaselineCase(
        label=label,
        runs=(figures.values,),
        samples=(_samples(kept),) if complete else None,
        model=model,
        requests=ttft.count,
        unmapped=(_GOODPUT, "time_per_output_token_ms (its TPOT counts the first token)"),
        refusals=(refusal,) if refusal else (),
        notes=notes,
    )


def load_label(strategy: Strategy) -> tuple[str, str | None]:
    """Our load label for a GuideLLM strategy, and why it matches none of ours (or None)."""
    kind = strategy.type_
    if kind == "synchronous":
        return Load.at_concurrency(1).label, None
    if kind == "concurrent" and strategy.streams:
        return Load.at_concurrency(strategy.streams).label, None
    if kind == "poisson" and strategy.rate:
        return Load.at_rate(strategy.rate).label, None
    if kind == "throughput":
        return Load.unbounded().label, None
    if kind == "constant" and strategy.rate:
        return f"constant {strategy.rate:g}/s", (
            f"GuideLLM's constant rate ({strategy.rate:g}/s) sends evenly spaced requests; "
            "our rate loads are poisson or gamma"
        )
    return str(kind), f"GuideLLM strategy {kind!r} is none of our load shapes"


def _empty(label: str, refusal: str | None, model: str | None) -> BaselineCase:
    reasons = ["no successful requests in this benchmark"] + ([refusal] if refusal else [])
    return BaselineCase(label, ({},), None, model, 0, refusals=tuple(reasons))


def _successful(by_status: ByStatus | None) -> Summary | None:
    return None if by_status is None else by_status.successful


def _own_figures(metrics: Metrics) -> Figures:
    figures = Figures()
    ttft = _successful(metrics.time_to_first_token_ms)
    e2e = _successful(metrics.request_latency)
    if ttft is not None:
        _put_summary(figures, "ttft_ms", ttft, 1.0)
    if e2e is not None:
        _put_summary(figures, "request_latency_ms", e2e, 1000.0)
    for theirs, ours in (
        (metrics.output_tokens_per_second, "output_throughput"),
        (metrics.requests_per_second, "request_throughput"),
    ):
        summary = _successful(theirs)
        if summary is not None and summary.count:
            figures.put(ours, summary.mean)
    return figures


def _put_summary(figures: Figures, column: str, summary: Summary, scale: float) -> None:
    figures.put(f"mean_{column}", summary.mean * scale)
    figures.put(f"p50_{column}", summary.percentiles.get("p50", summary.median) * scale)
    for q in QUANTILES[1:]:
        value = summary.percentiles.get(f"p{q}")
        figures.put(f"p{q}_{column}", None if value is None else value * scale)


def _put_recomputed(figures: Figures, column: str, values: Sequence[float | None]) -> None:
    finite = [v for v in values if v is not None]
    if not finite:
        return
    figures.put(f"mean_{column}", float(np.mean(finite)))
    for q in QUANTILES:
        figures.put(f"p{q}_{column}", percentile(finite, q))


def _in_window(requests: Sequence[Request], window: Window | None) -> list[Request]:
    """The requests GuideLLM's own figures count: those overlapping its measurement window."""
    if window is None:
        return list(requests)
    a, z = window.measure_start_time, window.measure_end_time
    return [
        r
        for r in requests
        if r.start is not None and r.end is not None and r.end >= a and r.start <= z
    ]


def _sample_note(config: Config, kept: int, counted: int) -> tuple[str, ...]:
    sample = config.sample_requests if config.sample_requests is not None else config.sample_size
    if sample is None and kept == counted:
        return ()
    return (_kept_note(kept, counted),)


def _kept_note(kept: int, counted: int) -> str:
    return (
        f"a sample: the file keeps {kept} of the {counted} requests its figures count, so "
        "its figures are judged as published, without its per-request values"
    )


def _samples(requests: Sequence[Request]) -> Samples:
    def column(values: list[float | None], scale: float = 1.0) -> npt.NDArray[np.float64]:
        return np.asarray([np.nan if v is None else v * scale for v in values], dtype=np.float64)

    return {
        "ttft_ms": column([r.time_to_first_token_ms for r in requests]),
        "tpot_ms": column([r.inter_token_latency_ms for r in requests]),
        "request_latency_ms": column([r.request_latency for r in requests], 1000.0),
    }


def _model_v04(benchmark: BenchmarkV04) -> str | None:
    if benchmark.config.backend is not None and benchmark.config.backend.model:
        return benchmark.config.backend.model
    successful = benchmark.requests.successful or []
    first = successful[0] if successful else None
    if first is None or first.request_args is None:
        return None
    try:
        body = orjson.loads(first.request_args).get("body") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return None
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) and len(model) <= 1024 else None

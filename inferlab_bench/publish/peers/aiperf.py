"""AIPerf's own summary export (``profile_export_aiperf.json``; ``PREFIX.json`` of a run of
ours) read as AIPerf meant it.

Fields used: ``aiperf_version``; per tag ``{avg,p50,p90,p95,p99,count}`` of
``time_to_first_token``, ``inter_token_latency`` and ``request_latency`` (ms); ``avg`` of
``request_throughput``, ``output_token_throughput``, ``total_token_throughput`` and
``request_count``; the model and load from ``input_config``: ``models.items[].name`` and
``phases[kind=profiling]`` (``type`` concurrency / poisson / gamma / constant, with
``concurrency``, ``rate``, ``smoothness``) in config 2.0 (0.13), ``endpoint.model_names`` and
``loadgen.concurrency`` / ``loadgen.request_rate`` before it. The figures are AIPerf's own,
which are ours: our case stage reads this same summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from inferlab_bench.load import Load
from inferlab_bench.publish.peers.model import (
    Baseline,
    BaselineCase,
    Count,
    Figures,
    Foreign,
    Ms,
    PerSecond,
    Text,
    parse,
)

TOOL = "aiperf"
_TAGS = (
    ("time_to_first_token", "ttft_ms"),
    ("inter_token_latency", "tpot_ms"),
    ("request_latency", "request_latency_ms"),
)


class Distribution(Foreign):
    avg: Ms | None = None
    p50: Ms | None = None
    p90: Ms | None = None
    p95: Ms | None = None
    p99: Ms | None = None


class Average(Foreign):
    avg: PerSecond | None = None


class Named(Foreign):
    name: Text


class Models(Foreign):
    items: Annotated[list[Named], Field(max_length=64)] = []


class Phase(Foreign):
    kind: Text | None = None
    type: Text | None = None
    concurrency: Count | None = None
    rate: PerSecond | None = None
    smoothness: Annotated[float, Field(gt=0.0, le=1e6, allow_inf_nan=False)] | None = None


class Endpoint(Foreign):
    model_names: Annotated[list[Text], Field(max_length=64)] = []


class LoadGen(Foreign):
    concurrency: Count | None = None
    request_rate: PerSecond | None = None


class InputConfig(Foreign):
    models: Models | None = None
    phases: Annotated[list[Phase], Field(max_length=64)] = []
    endpoint: Endpoint | None = None
    loadgen: LoadGen | None = None


class Export(Foreign):
    aiperf_version: Text | None = None
    input_config: InputConfig
    time_to_first_token: Distribution | None = None
    inter_token_latency: Distribution | None = None
    request_latency: Distribution | None = None
    request_throughput: Average | None = None
    output_token_throughput: Average | None = None
    total_token_throughput: Average | None = None
    request_count: Average | None = None


def is_export(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("input_config"), dict)
        and isinstance(data.get("request_latency"), dict)
    )


def read_export(path: Path, data: Any, syntax: str) -> Baseline:
    export = parse(Export, data, path)
    figures = Figures()
    for tag, ours in _TAGS:
        dist: Distribution | None = getattr(export, tag)
        if dist is not None:
            figures.put(f"mean_{ours}", dist.avg)
            for q in ("p50", "p90", "p95", "p99"):
                figures.put(f"{q}_{ours}", getattr(dist, q))
    for tag, ours in (
        ("request_throughput", "request_throughput"),
        ("output_token_throughput", "output_throughput"),
        ("total_token_throughput", "total_token_throughput"),
    ):
        average: Average | None = getattr(export, tag)
        figures.put(ours, None if average is None else average.avg)
    count = export.request_count.avg if export.request_count else None
    label, refusal = _label(export.input_config)
    refusals = [refusal] if refusal else []
    if count == 0:
        refusals.append("no completed requests (request_count: 0)")
    case = BaselineCase(
        label=label,
        runs=(figures.values,),
        samples=None,
        model=_model(export.input_config),
        requests=None if count is None else int(count),
        refusals=tuple(refusals),
    )
    return Baseline(TOOL, export.aiperf_version, path, (case,), f"AIPerf summary export ({syntax})")


def _model(config: InputConfig) -> str | None:
    if config.models is not None and config.models.items:
        return config.models.items[0].name
    if config.endpoint is not None and config.endpoint.model_names:
        return config.endpoint.model_names[0]
    return None


def _label(config: InputConfig) -> tuple[str, str | None]:
    profiling = [p for p in config.phases if p.kind in (None, "profiling")]
    if profiling:
        phase = profiling[0]
        if phase.type == "concurrency" and phase.concurrency:
            return Load.at_concurrency(phase.concurrency).label, None
        if phase.type in ("poisson", "gamma") and phase.rate:
            return Load.at_rate(phase.rate, phase.smoothness).label, None
        return str(phase.type), f"AIPerf's {phase.type!r} schedule is none of our load shapes"
    loadgen = config.loadgen
    if loadgen is not None and loadgen.request_rate:
        return Load.at_rate(loadgen.request_rate).label, None
    if loadgen is not None and loadgen.concurrency:
        return Load.at_concurrency(loadgen.concurrency).label, None
    return "?", "the export records no load (input_config has no profiling phase or loadgen)"

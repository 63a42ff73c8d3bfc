"""SGLang's ``bench_serving --output-file`` JSON Lines read as SGLang meant them: each line is
one run, appended by one invocation (a file often holds a whole sweep).

Fields used: ``model_id`` (newer files; older ones name no model), ``request_rate``
(``Infinity`` when unbounded), ``max_concurrency``, ``completed``, the prompt shape
(``dataset_name``, ``random_input_len``, ``random_output_len``, said beside the figures),
``{mean,median,p90,p95,p99}_e2e_latency_ms``, ``{mean,median,p90,p95,p99}_{ttft,tpot}_ms``,
``output_throughput``, ``request_throughput``. SGLang's percentiles are numpy's linear
ones, as ours; ``*_itl_ms`` pools every token gap of all requests (no AIPerf counterpart).
"""

from __future__ import annotations

import math
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

TOOL = "sglang bench_serving"
STATS = ("mean", "median", "p90", "p95", "p99")
_ITL = "itl (SGLang's ITL pools every token gap of all requests; AIPerf's is per request)"


class Line(Foreign):
    model_id: Text | None = None
    request_rate: Annotated[float, Field(ge=0.0)] | None = None
    max_concurrency: Count | None = None
    completed: Count | None = None
    dataset_name: Text | None = None
    random_input_len: Count | None = None
    random_output_len: Count | None = None
    output_throughput: PerSecond | None = None
    request_throughput: PerSecond | None = None
    mean_e2e_latency_ms: Ms | None = None
    median_e2e_latency_ms: Ms | None = None
    p90_e2e_latency_ms: Ms | None = None
    p95_e2e_latency_ms: Ms | None = None
    p99_e2e_latency_ms: Ms | None = None
    mean_ttft_ms: Ms | None = None
    median_ttft_ms: Ms | None = None
    p90_ttft_ms: Ms | None = None
    p95_ttft_ms: Ms | None = None
    p99_ttft_ms: Ms | None = None
    mean_tpot_ms: Ms | None = None
    median_tpot_ms: Ms | None = None
    p90_tpot_ms: Ms | None = None
    p95_tpot_ms: Ms | None = None
    p99_tpot_ms: Ms | None = None


def is_line(data: Any) -> bool:
    return isinstance(data, dict) and (
        "median_e2e_latency_ms" in data or "mean_e2e_latency_ms" in data
    )


def read_lines(path: Path, lines: tuple[Any, ...], syntax: str) -> Baseline:
    cases = tuple(_case(parse(Line, d, path, f"line {i}"), i) for i, d in enumerate(lines, 1))
    return Baseline(TOOL, None, path, cases, f"SGLang bench_serving output ({syntax})")


def _case(line: Line, number: int) -> BaselineCase:
    figures = Figures()
    for ours, theirs in (
        ("request_latency_ms", "e2e_latency"),
        ("ttft_ms", "ttft"),
        ("tpot_ms", "tpot"),
    ):
        for stat in STATS:
            name = "p50" if stat == "median" else stat
            figures.put(f"{name}_{ours}", getattr(line, f"{stat}_{theirs}_ms"))
    figures.put_all(
        [
            ("output_throughput", line.output_throughput),
            ("request_throughput", line.request_throughput),
        ]
    )
    refusals: tuple[str, ...] = ()
    if line.completed == 0:
        refusals = ("no completed requests (completed: 0): its figures describe nothing",)
    shape = f"line {number}: {line.dataset_name or '?'} prompts"
    if line.random_input_len is not None:
        shape += f", {line.random_input_len} in / {line.random_output_len} out tokens"
    return BaselineCase(
        label=_label(line),
        runs=(figures.values,),
        samples=None,
        model=line.model_id,
        requests=line.completed,
        unmapped=(_ITL,),
        refusals=refusals,
        notes=(shape,),
    )


def _label(line: Line) -> str:
    if line.max_concurrency:
        return Load.at_concurrency(line.max_concurrency).label
    rate = line.request_rate
    if rate is not None and math.isfinite(rate) and rate > 0:
        return Load.at_rate(rate).label
    return Load.unbounded().label

"""A scripted probe runner for the search's decision logic: figures from a latency rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from inferlab_bench.capacity.judge import ProbeFigures
from inferlab_bench.case.engine import LoadEngine
from inferlab_bench.case.stage import CaseOptions
from inferlab_bench.load import Load
from inferlab_bench.protocol import BenchClientRequest

VALID = {
    "requests_succeeded": "pass",
    "load_generator_kept_up": "pass",
    "prompt_tokens_reconciled": "pass",
    "output_lengths_honored": "pass",
    "cache_cold": "pass",
}


def figures(
    ttft_ms: list[float],
    *,
    verdicts: dict[str, str] | None = None,
    failed: list[bool] | None = None,
    status: str = "succeeded",
    bound_ms: float = 200.0,
    error: str = "AIPerf exited with code 1",
) -> ProbeFigures:
    values = np.asarray(ttft_ms, dtype=np.float64)
    succeeded = ~np.asarray(failed or [False] * len(values), dtype=bool)
    good = int(np.sum(succeeded & (values <= bound_ms)))
    return ProbeFigures(
        status=status,
        error=None if status == "succeeded" else error,
        verdicts=verdicts or VALID,
        failed_checks=() if verdicts is None else ("client_send_share_of_ttft 0.2 (bound 0.03)",),
        latencies={"ttft_ms": values},
        succeeded=succeeded,
        good_ratio=good / len(values) if len(values) else None,
        goodput=float(good),
        request_throughput=float(len(values)),
        certified={"ttft_ms": False},
    )


@dataclass
class ScriptedServer:
    """TTFT per request from the load; ``invalid`` loads fail validity the first N times."""

    ttft: Callable[[float, int], float]
    requests: int = 40
    invalid: dict[float, int] = field(default_factory=dict)
    seen: list[tuple[float, str]] = field(default_factory=list)

    def __call__(
        self, request: BenchClientRequest, options: CaseOptions, engine: LoadEngine | None
    ) -> ProbeFigures:
        load = Load.of(request.case.load_shape)
        value = float(load.concurrency if load.concurrency is not None else load.rate or 0.0)
        self.seen.append((value, request.artifact_dir.name))
        values = [self.ttft(value, i) for i in range(self.requests)]
        if self.invalid.get(value, 0) > 0:
            self.invalid[value] -= 1
            return figures(values, verdicts={**VALID, "load_generator_kept_up": "fail"})
        return figures(values)

"""AIPerf's own search planner, driven one probe at a time (the only AIPerf search import).

The planner is built the way ``aiperf profile`` builds it: our case's AIPerf config plus a
``sweep: {type: adaptive_search, ...}`` block, loaded and validated by AIPerf's config loader,
turned into a plan, and handed to AIPerf's planner factory. We then ask it for the next load,
run that load as our own case, and tell it what our judgement of the case measured (as
AIPerf ``RunResult`` summary metrics). We never run the config it proposes: the probe is our
case (population check, warmup, reset after warmup, records, validity), and an invalid probe
is not told at all, which AIPerf's own sweep loop cannot do.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import math
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from inferlab_bench.capacity.answer import PlannerFacts
from inferlab_bench.capacity.judge import GOOD_FRACTION_TAG, THROUGHPUT_TAG, bounds
from inferlab_bench.capacity.spec import Axis, PlannerName, SearchSpec
from inferlab_bench.errors import ConfigurationError
from inferlab_bench.metric_tags import LATENCIES_MS
from inferlab_bench.protocol import BenchRequestSloInput

SWEPT_PATHS = {
    Axis.CONCURRENCY: "phases.profiling.concurrency",
    Axis.RATE: "phases.profiling.rate",
}
_LOAD_KEYS = ("feasible_max", "infeasible_min")


def sla_filters(spec: SearchSpec, slo: BenchRequestSloInput) -> list[dict[str, Any]]:
    """Our criterion as AIPerf SLA filters (camelCase, as its config file spells them)."""
    criterion = spec.criterion
    if criterion.kind == "attainment":
        return [
            {
                "metricTag": GOOD_FRACTION_TAG,
                "stat": "avg",
                "op": "ge",
                "threshold": criterion.ratio,
            }
        ]
    stat = f"p{criterion.value:g}"
    return [
        {"metricTag": LATENCIES_MS[name], "stat": stat, "op": "le", "threshold": bound}
        for name, bound in bounds(slo).items()
    ]


def sweep_block(
    spec: SearchSpec, slo: BenchRequestSloInput, *, botorch: bool = False
) -> dict[str, Any]:
    """The ``sweep`` section of an AIPerf config that asks for this search. Without the
    optional BoTorch stack, ``bayesian`` is AIPerf's optuna planner with its TPE sampler:
    what AIPerf's bayesian preset falls back to (with a warning) anyway."""
    block: dict[str, Any] = {
        "type": "adaptive_search",
        "planner": planner_plugin(spec.planner, botorch=botorch),
        "searchSpace": [
            {
                "path": SWEPT_PATHS[spec.axis],
                "lo": spec.index_low,
                "hi": spec.index_high,
                "kind": "int",
                "prior": "log-uniform",
            }
        ],
        "objectives": [{"metric": THROUGHPUT_TAG, "stat": "avg", "direction": "maximize"}],
        "maxIterations": spec.max_probes,
        "slaFilters": sla_filters(spec, slo),
        # The warmup is the case's own (counted, from the population, reset after it).
        "slaWarmupSeconds": 0,
    }
    if spec.planner is PlannerName.BAYESIAN:
        block["nInitialPoints"] = min(5, spec.max_probes - 1)
        block["randomSeed"] = 0
        if not botorch:
            block["optunaSampler"] = "tpe"
    return block


def planner_plugin(planner: PlannerName, *, botorch: bool) -> str:
    """AIPerf's planner plugin name for ours."""
    if planner is PlannerName.BAYESIAN and not botorch:
        return "optuna"
    return str(planner)


def botorch_installed() -> bool:
    return importlib.util.find_spec("botorch") is not None


class AiperfPlanner:
    """One AIPerf planner: ``ask`` for the next planner integer, ``tell`` what it measured."""

    def __init__(self, config: Mapping[str, Any], spec: SearchSpec, slo: BenchRequestSloInput):
        from aiperf.config.loader.core import load_config_from_mapping
        from aiperf.config.loader.plan import build_benchmark_plan
        from aiperf.orchestrator.search_planner import build_search_planner

        document = copy.deepcopy(dict(config))
        self._botorch = botorch_installed()
        document["sweep"] = sweep_block(spec, slo, botorch=self._botorch)
        try:
            plan = build_benchmark_plan(load_config_from_mapping(document))
            with _foreign_warnings():
                planner = build_search_planner(plan)
        except Exception as exc:  # AIPerf's config errors, pydantic's, its planners' ValueError
            # Translated once, here: the search cannot start, and the person is told why.
            raise ConfigurationError(
                f"AIPerf refused the search: {exc}".splitlines()[0],
                hint="see docs/capacity.md for what each planner accepts",
            ) from exc
        if planner is None:
            raise ConfigurationError("AIPerf built no planner for the search")
        self._planner = planner
        self._spec = spec
        self._pending: Any = None

    def ask(self) -> int | None:
        """The next planner integer to probe, or None when the planner has converged."""
        if self._pending is None:
            with _foreign_warnings():
                proposal = self._planner.ask()
            if proposal is None:
                return None
            self._pending = proposal[1]
        return int(next(iter(self._pending.values.values())))

    def tell(self, label: str, metrics: Mapping[str, Mapping[str, float | None]]) -> bool:
        """Tell the pending probe's figures; return AIPerf's feasibility verdict of them."""
        from aiperf.common.models.export_models import JsonMetricResult
        from aiperf.orchestrator.models import RunResult

        summary = {
            tag: JsonMetricResult(
                unit="",
                **{k: v for k, v in stats.items() if v is not None and math.isfinite(v)},
            )
            for tag, stats in metrics.items()
        }
        variation, self._pending = self._pending, None
        result = RunResult(label=label, success=True, summary_metrics=summary)
        with _foreign_warnings():
            self._planner.tell(variation, [result])
        return bool(self._planner.history()[-1].feasible)

    def facts(self) -> PlannerFacts:
        boundary = self._planner.boundary_summary()
        return PlannerFacts(
            name=planner_plugin(self._spec.planner, botorch=self._botorch),
            convergence_reason=self._planner.convergence_reason(),
            boundary=None if boundary is None else self._in_loads(dict(boundary)),
        )

    def _in_loads(self, boundary: dict[str, Any]) -> dict[str, Any]:
        """The planner's integers back in loads (rates are searched in RATE_STEP units)."""
        for key in _LOAD_KEYS:
            block = boundary.get(key)
            if isinstance(block, dict) and isinstance(block.get("value"), int | float):
                boundary[key] = {**block, "value": self._spec.load(int(block["value"]))}
        # boundary_ci stays as AIPerf gives it: a bootstrap CI of the binding SLO's margin.
        return boundary


@contextlib.contextmanager
def _foreign_warnings() -> Iterator[None]:
    """AIPerf 0.13's optuna planner passes optuna 5 a deprecated ``constraints_func``: its
    FutureWarning is about their code, not ours, and must not reach a person's terminal."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*constraints_func")
        yield

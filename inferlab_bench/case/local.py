"""LocalEngine: the case's load as an ``aiperf profile`` subprocess on this machine."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from inferlab_bench.case import reset, runner
from inferlab_bench.case.aiperf_plugin.hook import ENV_VAR, HookSettings
from inferlab_bench.case.aiperf_plugin.priorities import BookkeepingPolicy, choose_bookkeeping
from inferlab_bench.case.engine import EngineOutcome, EngineRun
from inferlab_bench.case.reset import ResetTarget
from inferlab_bench.case.usage import procs_running
from inferlab_bench.layout import (
    AIPERF_CONSOLE_LOG,
    PROFILING_START_METRICS,
    RESET_EVIDENCE_FILE,
    cache_root,
)
from inferlab_bench.protocol import BenchClientRequest, ConcurrencyLimited

DEAD_HUB_ENDPOINT = "http://127.0.0.1:9"
"""Where the model hub client is pointed for AIPerf: nothing listens on the discard port, so
any hub call fails at once instead of going online."""


class LocalEngine:
    """AIPerf in a subprocess of this Python environment, stopped by the stage's guard."""

    name = "local"
    reaches_server_from_here = True
    hosts_our_plugin = True

    def __init__(self, *, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir

    def check(self, request: BenchClientRequest, reset: ResetTarget | None) -> None:
        """A local run can do every case the protocol allows."""

    def reset_urls(self, request: BenchClientRequest) -> list[str]:
        return [request.endpoint.base_url]

    def run(self, run: EngineRun) -> EngineOutcome:
        request = run.request
        cache = self._cache_dir if self._cache_dir is not None else cache_root()
        env = aiperf_environment(os.environ, cache) | dict(run.aiperf_env)
        if run.reset_after_warmup is not None or run.schedule_path is not None:
            settings = HookSettings(
                base_url=request.endpoint.base_url,
                target=run.reset_after_warmup,
                timeout=min(reset.DEFAULT_TIMEOUT_SECONDS, max(1.0, run.guard.remaining())),
                evidence_path=request.artifact_dir / RESET_EVIDENCE_FILE,
                metrics_path=request.artifact_dir / PROFILING_START_METRICS,
                schedule_path=run.schedule_path,
            )
            env[ENV_VAR] = settings.to_env()
        log_path = request.artifact_dir / AIPERF_CONSOLE_LOG
        runnable = runnable_elsewhere()
        outcome = runner.run_aiperf(
            run.config_path,
            log_path=log_path,
            guard=run.guard,
            stop_at=run.stop_at,
            env=env,
            echo=run.echo,
            bookkeeping=bookkeeping_for(request, runnable),
            runnable_before=runnable,
        )
        stopped_by = "deadline" if outcome.timed_out else "signal" if outcome.interrupted else None
        return EngineOutcome(
            command=outcome.command,
            exit_code=outcome.exit_code,
            log_path=log_path,
            stopped_by=stopped_by,
            duration=outcome.duration,
            usage=outcome.usage,
        )


def bookkeeping_for(request: BenchClientRequest, runnable: int | None = None) -> BookkeepingPolicy:
    """How AIPerf's bookkeeping yields to its sender here: from this host's cores, the load,
    and ``runnable`` other tasks wanting a core (``runnable_elsewhere``)."""
    shape = request.case.load_shape
    concurrency = shape.concurrency if isinstance(shape, ConcurrencyLimited) else None
    return choose_bookkeeping(os.cpu_count() or 1, concurrency, runnable)


def runnable_elsewhere(samples: int = 5, interval: float = 0.02) -> int | None:
    """Tasks on a core or waiting for one, besides this reader: the median of ``samples``
    reads of /proc/stat ``interval`` s apart (one read is a moment's chance); None off Linux."""
    reads = []
    for i in range(samples):
        if i:
            time.sleep(interval)
        running = procs_running()
        if running is None:
            return None
        reads.append(running - 1)
    return sorted(reads)[len(reads) // 2]


def aiperf_environment(base: Mapping[str, str], cache_dir: Path) -> dict[str, str]:
    """AIPerf's environment: never online, and its caches kept out of the user's home.

    The tokenizer is a local directory (the request is refused otherwise), which AIPerf 0.13
    loads by path; its hub offline switch would instead look the path up as a cached repo id
    and fail, so the hub client is pointed at a dead loopback address rather than switched off.
    AIPerf's dataset cache (``~/.cache/aiperf`` by default, whatever XDG_CACHE_HOME says),
    matplotlib's config directory and the hub client's home go under our cache.
    """
    env = dict(base)
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("TRANSFORMERS_OFFLINE", None)
    env["HF_ENDPOINT"] = DEAD_HUB_ENDPOINT
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    env["HF_HUB_DISABLE_IMPLICIT_TOKEN"] = "1"
    env["AIPERF_DATASET_MMAP_CACHE_DIR"] = str(cache_dir / "aiperf" / "dataset_mmap")
    env["MPLCONFIGDIR"] = str(cache_dir / "matplotlib")
    env["HF_HOME"] = str(cache_dir / "huggingface")
    return env

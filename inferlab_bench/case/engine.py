"""The seam between a case and where its load runs: what an engine is given and what it returns.

The case stage (``case.stage.run_case``) does everything before and after the load itself
the same way for every engine: check the request and the population, build the AIPerf
config, reset the prefix cache, read the records, compute metrics, goodput and validity,
and write the result. An engine only runs that config and leaves AIPerf's outputs under
``artifact_dir/aiperf/``:

- ``case.local.LocalEngine``: ``aiperf profile`` as a subprocess on this machine;
- ``kube.job.KubeEngine``: the same config as an AIPerfJob on Kubernetes, results fetched back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

from inferlab_bench.case.reset import ResetTarget
from inferlab_bench.case.usage import UsageSeries
from inferlab_bench.interrupts import Guard
from inferlab_bench.protocol import BenchClientRequest, RawArtifact


@dataclass(frozen=True)
class EngineRun:
    """One load to run: the request, its AIPerf config (already written) and its limits."""

    request: BenchClientRequest
    config: dict[str, Any]
    config_path: Path
    guard: Guard
    """The stage's signals and hard deadline: an engine stops what it started when it fires."""
    stop_at: float
    """Monotonic time by which the engine must have stopped its load (the stage keeps the rest
    of the budget for reading the outputs and writing the result)."""
    reset_after_warmup: ResetTarget | None = None
    """Reset the prefix cache between warmup and profiling (an engine that cannot refuses
    such a case in ``check``)."""
    schedule_path: Path | None = None
    """Where our AIPerf plugin writes the profiling phase's planned schedule (rate loads on an
    engine that ``hosts_our_plugin``); None: not recorded."""
    echo: IO[str] | None = None
    """Where the load generator's console output is streamed (None: only its log)."""
    aiperf_env: Mapping[str, str] = field(default_factory=dict)
    """AIPerf settings (environment variables) this server needs, e.g. its connections."""
    artifacts: list[RawArtifact] = field(default_factory=list)
    """Where the engine lists its own evidence (manifests, engine logs) as it writes it, so
    that a failed run still lists them."""


@dataclass(frozen=True)
class EngineOutcome:
    """How the load ended. Failures to start or to finish are raised as InferlabError."""

    command: list[str]
    exit_code: int | None
    log_path: Path
    stopped_by: str | None = None
    """None, ``deadline`` or ``signal``: the stage, not the load generator, ended it."""
    duration: float = 0.0
    usage: UsageSeries | None = None
    """The load generator's CPU time and the host's run queue while it ran, when sampled
    here (a local run); None where the load ran out of sight (a Kubernetes pod)."""


@runtime_checkable
class LoadEngine(Protocol):
    """Where a case's load runs."""

    @property
    def name(self) -> str:
        """``local`` or ``kube``: recorded with the result."""
        ...

    @property
    def reaches_server_from_here(self) -> bool:
        """Whether the load comes from this machine (so the stage probes the server first)."""
        ...

    @property
    def hosts_our_plugin(self) -> bool:
        """Whether AIPerf runs with our plugin installed (our timing strategy can be named)."""
        ...

    def check(self, request: BenchClientRequest, reset: ResetTarget | None) -> None:
        """Refuse, before anything is contacted, what this engine cannot run faithfully
        (for example a reset between warmup and profiling, where it has no hook)."""
        ...

    def reset_urls(self, request: BenchClientRequest) -> list[str]:
        """Base URLs of every server whose prefix cache a reset before the run must clear."""
        ...

    def run(self, run: EngineRun) -> EngineOutcome:
        """Run the load to its end (or ``stop_at``); AIPerf's outputs land in the aiperf dir."""
        ...

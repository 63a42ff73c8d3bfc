"""Case stage: prefix-cache reset, one AIPerf run, records -> BenchClientResult."""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from inferlab_bench import validity
from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.case import (
    aiperf_config,
    connections,
    integrity,
    llamacpp,
    metrics,
    prefix,
    probe,
    reset,
    runner,
    server_metrics,
    slo,
)
from inferlab_bench.case.aiperf_plugin.hook import ENV_VAR, HookSettings
from inferlab_bench.case.records import CaseRecords, read_json_file, read_records
from inferlab_bench.errors import (
    CaseInterruptedError,
    DeadlineExceededError,
    DigestMismatchError,
    InferlabError,
    LoadGeneratorError,
    PopulationError,
    PrefixCacheResetError,
    RecordsError,
)
from inferlab_bench.layout import evidence_path
from inferlab_bench.protocol import (
    BenchClientRequest,
    BenchClientResult,
    BenchRequestSloResult,
    ClientStatus,
    DatasetSource,
    RandomSource,
    RawArtifact,
)

RESULT_RESERVE_SECONDS = 2.0
"""Budget kept back from AIPerf for reading its outputs and writing the result."""
COLD_WAVE = 256
"""At most this many first profiling requests are judged by the cold-start check."""
_PREFIX = aiperf_config.ARTIFACT_PREFIX
PROFILING_START_METRICS = "server-metrics-profiling-start.json"
"""The server's /metrics as our plugin read it between warmup and profiling."""


@dataclass(frozen=True)
class CaseOptions:
    """What the command line adds to the request."""

    prefix_cache_reset: str | None = None
    """``reset.OPTION_HELP`` (vllm, llamacpp, METHOD:/path ...); None = decide from the server."""
    echo: IO[str] | None = None
    """Where AIPerf's output is streamed (stderr when None)."""
    connections: str | None = None
    """``auto|pooled|close`` (``connections.OPTION_HELP``); None = decide from the server."""


@dataclass
class _Case:
    """The running case: its paths and what has been produced so far."""

    request: BenchClientRequest
    options: CaseOptions
    deadline: float
    artifacts: list[RawArtifact] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    exit_code: int | None = None
    aiperf_env: dict[str, str] = field(default_factory=dict)
    """Settings for AIPerf's environment chosen for this server (connections)."""
    metrics_window: list[server_metrics.Scrape | None] = field(default_factory=list)
    """The server's /metrics right before AIPerf started and right after it exited."""

    @property
    def root(self) -> Path:
        return self.request.artifact_dir

    @property
    def aiperf_dir(self) -> Path:
        return aiperf_dir(self.request)

    def add(self, name: str, kind: str, path: Path) -> None:
        if path.exists() and all(a.path != path for a in self.artifacts):
            self.artifacts.append(RawArtifact(name=name, kind=kind, path=path))

    def write_json(self, name: str, kind: str, document: Any) -> Path:
        path = self.root / f"{name}.json"
        write_bytes_atomic(path, orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
        self.add(name, kind, path)
        return path


def run_case(request: BenchClientRequest, options: CaseOptions | None = None) -> BenchClientResult:
    """Run one case; always returns a result (failed ones carry the error and artifacts)."""
    case = _Case(request, options or CaseOptions(), time.monotonic() + request.case_budget_seconds)
    try:
        return _run(case)
    except InferlabError as exc:
        return _failed(case, str(exc))


def _run(case: _Case) -> BenchClientResult:
    request = case.request
    case.root.mkdir(parents=True, exist_ok=True)
    check_population(request)
    probe.check_listening(request.endpoint.base_url, timeout=min(5.0, max(0.5, _remaining(case))))
    _choose_connections(case)
    target = _reset_target(case)
    if target is not None and target.per_slot:
        _check_llamacpp_prompt_cache(case, target)
    with_warmup_reset = target is not None and request.case.warmup_request_count > 0
    plan = aiperf_config.build_plan(
        request,
        aiperf_dir=case.aiperf_dir,
        timeout_seconds=_remaining(case),
        reset_after_warmup=with_warmup_reset,
    )
    config_path = case.write_json("aiperf-config", "config", plan.config)
    case.write_json("request-body", "request_body", plan.body.as_json())
    if request.population is not None:
        case.add("population", "inputs", request.population.path)
    if target is not None and not with_warmup_reset:
        _reset_now(case, target)
    outcome = _run_aiperf(case, config_path, target if with_warmup_reset else None)
    return _measure(case, outcome.exit_code, outcome.log_path, reset_checked=target is not None)


# --- The pieces a case run elsewhere (AIPerf on Kubernetes) reuses instead of copying. ---


def aiperf_dir(request: BenchClientRequest) -> Path:
    """Where AIPerf's outputs of the case lie (written there, or fetched there)."""
    return request.artifact_dir / "aiperf"


def planned_config(request: BenchClientRequest, *, reset_after_warmup: bool) -> dict[str, Any]:
    """The AIPerf config this case runs locally, for the whole budget (nothing written)."""
    plan = aiperf_config.build_plan(
        request,
        aiperf_dir=aiperf_dir(request),
        timeout_seconds=request.case_budget_seconds - RESULT_RESERVE_SECONDS,
        reset_after_warmup=reset_after_warmup,
    )
    return plan.config


def reset_target(request: BenchClientRequest, options: CaseOptions) -> reset.ResetTarget | None:
    """The reset the case asks for (None when it asks none); errors as a local case gives."""
    return _reset_target(_Case(request, options, time.monotonic() + request.case_budget_seconds))


def reset_before_run(request: BenchClientRequest, target: reset.ResetTarget) -> list[RawArtifact]:
    """Reset the prefix cache now and record it (reset-evidence.json); raises when it failed."""
    case = _Case(request, CaseOptions(), time.monotonic() + request.case_budget_seconds)
    request.artifact_dir.mkdir(parents=True, exist_ok=True)
    _reset_now(case, target)
    return case.artifacts


def measure_outputs(
    request: BenchClientRequest,
    *,
    command: list[str],
    exit_code: int | None,
    log_path: Path,
    reset_checked: bool,
) -> BenchClientResult:
    """The result of AIPerf outputs already laid out under ``artifact_dir/aiperf`` (fetched
    from a run elsewhere), judged exactly as a local run's; failures are failed results."""
    case = _Case(request, CaseOptions(), time.monotonic() + request.case_budget_seconds)
    case.command, case.exit_code = command, exit_code
    _collect_outputs(case, log_path)
    try:
        return _measure(case, exit_code, log_path, reset_checked=reset_checked)
    except InferlabError as exc:
        return _failed(case, str(exc))


# --- The local case. ---


def check_population(request: BenchClientRequest) -> None:
    """The population file is the one the request names (sha256) and holds enough entries."""
    if not isinstance(request.definition.request_source, DatasetSource):
        return
    population = request.population
    if population is None:
        raise PopulationError("population: a dataset request source needs a population")
    try:
        data = population.path.read_bytes()
    except OSError as exc:
        raise PopulationError(
            f"population.path {population.path}: cannot read ({exc.strerror or exc})"
        ) from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != population.sha256:
        raise DigestMismatchError(f"population {population.path}", population.sha256, digest)
    needed, present = aiperf_config.total_entries(request), data.count(b"\n")
    if present < needed:
        raise PopulationError(
            f"population {population.path}: {present} entries, the case needs {needed} "
            f"(warmup {request.case.warmup_request_count} + requests {request.case.request_count})",
            hint="prepare a larger population or lower request_count / warmup_request_count",
        )


def _choose_connections(case: _Case) -> None:
    """AIPerf's connection settings for this server, recorded as connections.json."""
    choice = connections.choose(
        case.request.endpoint.base_url, case.options.connections, timeout=min(5.0, _remaining(case))
    )
    case.aiperf_env = dict(choice.env)
    case.write_json("connections", "config", choice.as_json())


def _reset_target(case: _Case) -> reset.ResetTarget | None:
    if not case.request.definition.reset_prefix_cache:
        return None
    option = case.options.prefix_cache_reset
    if option is None:
        return reset.detect_target(case.request.endpoint.base_url)
    target = reset.parse_reset_option(option)
    if target is None:
        raise PrefixCacheResetError(
            f"definition.reset_prefix_cache is true but --prefix-cache-reset {option} "
            "names a server without a prefix-cache reset",
            hint="run the case without reset_prefix_cache, or give the reset method and path",
        )
    return target


def _check_llamacpp_prompt_cache(case: _Case, target: reset.ResetTarget) -> None:
    """A slot erase leaves llama.cpp's RAM prompt cache warm: refuse the case if it is on."""
    request = case.request
    probe = llamacpp.probe_prompt_cache(
        request.endpoint.base_url,
        request.model.served_name,
        request.endpoint.chat_completions_path,
        target,
        timeout=min(30.0, _remaining(case)),
    )
    case.write_json("prompt-cache-probe", "reset_evidence", probe.as_json())
    llamacpp.refuse_if_on(probe)


def _reset_now(case: _Case, target: reset.ResetTarget) -> None:
    # Without warmup nothing runs between this call and the first profiling request.
    calls = reset.reset_all(
        case.request.endpoint.base_url, target, timeout=min(30.0, _remaining(case))
    )
    path = case.root / "reset-evidence.json"
    reset.write_evidence(path, target, calls, when="before-run")
    case.add("reset-evidence", "reset_evidence", path)
    for call in calls:
        reset.raise_unless_ok(call)


def _run_aiperf(
    case: _Case, config_path: Path, hook_target: reset.ResetTarget | None
) -> runner.RunOutcome:
    env = _environment(case.request.model.locator) | case.aiperf_env
    if hook_target is not None:
        settings = HookSettings(
            base_url=case.request.endpoint.base_url,
            target=hook_target,
            timeout=min(30.0, _remaining(case)),
            evidence_path=case.root / "reset-evidence.json",
            metrics_path=case.root / PROFILING_START_METRICS,
        )
        env[ENV_VAR] = settings.to_env()
    case.aiperf_dir.mkdir(parents=True, exist_ok=True)
    log_path = case.root / "aiperf-output.log"
    case.command = runner.aiperf_command(config_path)
    base_url = case.request.endpoint.base_url
    case.metrics_window = [server_metrics.scrape(base_url, timeout=min(5.0, _remaining(case)))]
    try:
        outcome = runner.run_aiperf(
            config_path,
            log_path=log_path,
            deadline=case.deadline - RESULT_RESERVE_SECONDS,
            env=env,
            echo=case.options.echo,
        )
    finally:
        case.metrics_window.append(server_metrics.scrape(base_url, timeout=5.0))
        _collect_outputs(case, log_path)
    case.exit_code = outcome.exit_code
    _check_outcome(case, outcome, hook_target is not None)
    return outcome


def _environment(locator: str) -> dict[str, str]:
    env = dict(os.environ)
    if Path(locator).is_dir():
        # A local directory never touches the network; AIPerf 0.13's offline mode would
        # wrongly treat the path as a hub repo id (snapshot_download) and fail.
        env.pop("HF_HUB_OFFLINE", None)
        env.pop("TRANSFORMERS_OFFLINE", None)
    else:
        env["HF_HUB_OFFLINE"] = "1"
        env["TRANSFORMERS_OFFLINE"] = "1"
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    return env


def _collect_outputs(case: _Case, log_path: Path) -> None:
    case.add("aiperf-output", "log", log_path)
    case.add("aiperf-log", "log", case.aiperf_dir / "logs" / "aiperf.log")
    case.add("summary", "summary", case.aiperf_dir / f"{_PREFIX}.json")
    case.add("records", "records", case.aiperf_dir / f"{_PREFIX}.jsonl")
    case.add("raw-records", "raw_records", case.aiperf_dir / f"{_PREFIX}_raw.jsonl")
    case.add("phase-manifest", "phase_manifest", case.aiperf_dir / "phase_manifest.json")
    case.add("reset-evidence", "reset_evidence", case.root / "reset-evidence.json")


def _check_outcome(case: _Case, outcome: runner.RunOutcome, hooked: bool) -> None:
    if outcome.interrupted:
        raise CaseInterruptedError(
            f"case interrupted by a signal after {outcome.duration:.1f} s; AIPerf was stopped "
            f"(exit code {outcome.exit_code})",
            hint="the partial AIPerf outputs are listed in raw_artifacts",
        )
    if outcome.timed_out:
        raise DeadlineExceededError(
            f"case_budget_seconds {case.request.case_budget_seconds:g} ran out while AIPerf was "
            f"running ({outcome.duration:.1f} s); AIPerf was stopped",
            hint="raise the budget or lower request_count; the server may be stalling",
        )
    if hooked:
        _check_hook_reset(case, outcome)
    if outcome.exit_code != 0 and not (case.aiperf_dir / f"{_PREFIX}.jsonl").is_file():
        raise _exit_error(outcome.exit_code, outcome.log_path)


def _exit_error(exit_code: int | None, log_path: Path) -> LoadGeneratorError:
    return LoadGeneratorError(
        f"AIPerf exited with code {exit_code}: {_log_reason(log_path)}",
        hint=f"see {log_path}",
    )


def _check_hook_reset(case: _Case, outcome: runner.RunOutcome) -> None:
    calls = reset.read_evidence(case.root / "reset-evidence.json")
    if not calls and outcome.exit_code != 0:
        raise _exit_error(outcome.exit_code, outcome.log_path)  # its cause, not the reset's
    if not calls:
        raise PrefixCacheResetError(
            "the prefix-cache reset after warmup never ran (warmup did not finish?)",
            hint="see the AIPerf log",
        )
    for call in calls:
        reset.raise_unless_ok(call)


def _log_reason(log_path: Path, limit: int = 400) -> str:
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return "no output"
    reasons = [line.strip(" │") for line in lines if "Reason:" in line or " ERROR " in line]
    text = (reasons[0] if reasons else (lines[-1] if lines else "no output")).strip()
    return text[:limit]


def _measure(
    case: _Case, exit_code: int | None, log_path: Path, *, reset_checked: bool
) -> BenchClientResult:
    request = case.request
    records = read_records(case.aiperf_dir / f"{_PREFIX}.jsonl")
    _check_validity(case, records)
    profiling = records.profiling
    # AIPerf exits 1 and writes no summary when every request failed: still a measurement.
    all_failed = bool(np.all(profiling.has_error | profiling.was_cancelled))
    if exit_code != 0 and not all_failed:
        raise _exit_error(exit_code, log_path)
    summary_path = case.aiperf_dir / f"{_PREFIX}.json"
    summary = (
        {} if all_failed and not summary_path.exists() else read_json_file(summary_path, "summary")
    )
    slo_evidence = _slo(case, records, summary)
    completed = int(np.sum(~(profiling.has_error | profiling.was_cancelled)))
    scope = metrics.MetricScope(
        tpot_applicable=_tpot_applicable(request),
        latencies_measured=completed > 0,
        cache_reads_reported=profiling.reports("usage_prompt_cache_read_tokens")
        and metrics.summary_value(summary, metrics.CACHE_READ_TAG) is not None,
        slo_set=request.definition.request_slo is not None,
    )
    normalized = metrics.normalize(summary, scope, slo_evidence)
    population = _population_lines(request)
    cold = _cold_start_verdict(case, records, population) if reset_checked else None
    _write_validity(case, records, population, cold)
    if len(case.metrics_window) == 2:
        _write_server_metrics(case, records)
    if cold is not None and not cold.cold:
        raise PrefixCacheResetError(
            f"the prefix cache was not cold after the reset: {cold.reason}",
            hint="the server accepted the reset call but kept its cache",
        )
    return BenchClientResult(
        status=ClientStatus.SUCCEEDED,
        completed_requests=completed,
        failed_requests=len(profiling) - completed,
        metrics=normalized,
        request_slo=slo_evidence,
        native_command=case.command,
        native_exit_code=case.exit_code,
        raw_artifacts=case.artifacts,
    )


def _check_validity(case: _Case, records: CaseRecords) -> None:
    shape = case.request.case
    integrity.check_warmup_complete(records.warmup, shape.warmup_request_count)
    if isinstance(case.request.definition.request_source, DatasetSource):
        integrity.check_population_identity(
            records, shape.warmup_request_count, shape.request_count
        )
    slo.check_profiling_records(records.profiling)
    if len(records.profiling) != shape.request_count:
        raise RecordsError(
            f"profiling: expected {shape.request_count} records, "
            f"AIPerf wrote {len(records.profiling)}"
        )


def _slo(
    case: _Case, records: CaseRecords, summary: dict[str, Any]
) -> BenchRequestSloResult | None:
    if case.request.definition.request_slo is None:
        return None
    return slo.slo_result(
        records.profiling,
        request_count=case.request.case.request_count,
        native_good_count=metrics.summary_value(summary, "good_request_count"),
    )


def _population_lines(request: BenchClientRequest) -> list[dict[str, Any]] | None:
    """The replayed population's lines (None for AIPerf's synthetic prompts)."""
    population = request.population
    if not isinstance(request.definition.request_source, DatasetSource) or population is None:
        return None
    return _json_lines(population.path)


def _cold_start_verdict(
    case: _Case, records: CaseRecords, population: list[dict[str, Any]] | None
) -> integrity.ColdStartVerdict | None:
    """The post-reset check of the first wave, written as cold-start.json."""
    request = case.request
    count = request.case.request_count
    size = min(getattr(request.case.load_shape, "concurrency", None) or count, count, COLD_WAVE)
    wave = integrity.first_wave(records.profiling, size)
    bounds = None
    if wave is not None and population is not None:
        bounds = _prefix_bounds(request, population, wave)
    verdict = integrity.cold_start_verdict(records.profiling, first_wave=size, prefix_bounds=bounds)
    case.write_json(
        "cold-start",
        "reset_evidence",
        {"schema_version": 1, "verdict": None if verdict is None else verdict.as_json()},
    )
    return verdict


def _prefix_bounds(
    request: BenchClientRequest, population: list[dict[str, Any]], wave: list[str | None]
) -> list[int] | None:
    """What each first-wave request may hit: its prompt's prefix shared with earlier ones."""
    by_session = {line.get("session_id"): line.get("messages") for line in population}
    found = [by_session.get(session) for session in wave]
    conversations = [messages for messages in found if isinstance(messages, list)]
    if len(conversations) != len(wave):
        return None
    kwargs = aiperf_config.build_request_body(request).body.get("chat_template_kwargs")
    if not isinstance(kwargs, dict):
        kwargs = {}
    prompts = prefix.prompt_token_ids(request.model.locator, conversations, kwargs)
    return prefix.prefix_bounds(prompts)


def _write_validity(
    case: _Case,
    records: CaseRecords,
    population: list[dict[str, Any]] | None,
    cold: integrity.ColdStartVerdict | None,
) -> None:
    """validity.json: every measurement-validity verdict with the figures behind it."""
    request = case.request
    source = request.definition.request_source
    expectations: validity.Expectations | None = None
    population_sha256: str | None = None
    if isinstance(source, RandomSource):
        # Synthetic prompts: their rendered length is unknown here, the output count is not.
        expectations = validity.Expectations(output_tokens=source.output_tokens)
    elif population is not None and request.population is not None:
        expectations = _expectations(request.population.path, population)
        population_sha256 = request.population.sha256
    document = validity.assess_case(
        records,
        request.case.load_shape,
        expectations=expectations,
        population_sha256=population_sha256,
        reset_requested=request.definition.reset_prefix_cache,
        post_reset_cold=None if cold is None else cold.cold,
    )
    case.write_json("validity", "validity", document.to_json_dict())


def _write_server_metrics(case: _Case, records: CaseRecords) -> None:
    """server-metrics.json: the server's counter deltas over the run beside our sums."""
    before, after = case.metrics_window
    at_profiling = case.root / PROFILING_START_METRICS
    profiling_only = at_profiling.is_file()
    if profiling_only:
        before = server_metrics.read_scrape(at_profiling)
    ours = server_metrics.our_totals(records, profiling_only=profiling_only)
    window = "profiling" if profiling_only else "aiperf-run"
    document = server_metrics.comparison(before, after, ours, window)
    case.write_json("server-metrics", "summary", document)


def _expectations(path: Path, lines: list[dict[str, Any]]) -> validity.Expectations:
    """Planned tokens per session: the population's output lengths, its evidence's inputs."""
    evidence = evidence_path(path)
    return validity.expectations_from_population(
        lines, _json_lines(evidence) if evidence.is_file() else None
    )


def _json_lines(path: Path) -> list[dict[str, Any]]:
    try:
        return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    except (OSError, orjson.JSONDecodeError) as exc:
        raise PopulationError(f"{path}: cannot read JSON lines ({exc})") from exc


def _tpot_applicable(request: BenchClientRequest) -> bool:
    source = request.definition.request_source
    if isinstance(source, RandomSource):
        return source.output_tokens >= 2
    return request.population is not None and request.population.tpot_applicable


def _remaining(case: _Case) -> float:
    return case.deadline - time.monotonic() - RESULT_RESERVE_SECONDS


def _failed(case: _Case, message: str) -> BenchClientResult:
    return BenchClientResult(
        status=ClientStatus.FAILED,
        native_command=case.command,
        native_exit_code=case.exit_code,
        raw_artifacts=case.artifacts,
        error=message,
    )

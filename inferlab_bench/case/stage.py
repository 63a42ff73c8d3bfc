"""Case stage: one orchestration for every engine: checks, reset, the load, records -> result.

``run_case`` does everything before and after the load the same way wherever the load runs
(``case.engine``): it checks the request and the population, builds and writes the AIPerf
config, resets the prefix cache (before the run, or between warmup and profiling where the
engine can), hands the load to the engine, then reads AIPerf's records and summary, checks
integrity, computes metrics, goodput and validity, and returns ``BenchClientResult``. The
whole stage runs under the case budget as a hard deadline and answers SIGTERM/SIGINT with a
failed result listing the artifacts written so far (``interrupts``).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from inferlab_bench import interrupts, validity
from inferlab_bench import metric_tags as tags
from inferlab_bench.atomic import readable_file_problem, write_bytes_atomic
from inferlab_bench.case import (
    aiperf_config,
    connections,
    conversation,
    integrity,
    llamacpp,
    metrics,
    prefix,
    probe,
    reset,
    server_metrics,
    server_truth,
    sessions,
    slo,
    usage,
)
from inferlab_bench.case.aiperf_log import failure_reason
from inferlab_bench.case.aiperf_plugin import switches
from inferlab_bench.case.aiperf_plugin.schedule import read_schedule
from inferlab_bench.case.aiperf_plugin.switches import WIRE_START_ENV_VAR
from inferlab_bench.case.engine import EngineOutcome, EngineRun, LoadEngine
from inferlab_bench.case.local import LocalEngine
from inferlab_bench.case.records import CaseRecords, read_json_file, read_records
from inferlab_bench.errors import (
    DigestMismatchError,
    InferlabError,
    LoadGeneratorError,
    OutputError,
    PopulationError,
    PrefixCacheResetError,
    RecordsError,
)
from inferlab_bench.layout import (
    AIPERF_CONFIG_FILE,
    AIPERF_DIR,
    CLIENT_USAGE_FILE,
    PLANNED_SCHEDULE_FILE,
    PROFILING_START_METRICS,
    REQUEST_BODY_FILE,
    RESET_EVIDENCE_FILE,
    SERVER_TRUTH_FILE,
    VALIDITY_FILE,
    aiperf_outputs,
    evidence_path,
)
from inferlab_bench.load import Load
from inferlab_bench.protocol import (
    BenchClientRequest,
    BenchClientResult,
    BenchRequestSloResult,
    ClientStatus,
    ConcurrencyLimited,
    DatasetSource,
    RandomSource,
    RawArtifact,
)
from inferlab_bench.tokenizer import tokenizer_dir
from inferlab_bench.validity.schedule import PlannedSchedule

RESULT_RESERVE_SECONDS = 2.0
"""Budget kept back from the load for reading its outputs and writing the result."""
STOP_RESERVE_SECONDS = 1.5
"""Of that, what stopping a load that overran its time may take."""


@dataclass(frozen=True)
class CaseOptions:
    """What the command line adds to the request."""

    prefix_cache_reset: str | None = None
    """``reset.OPTION_HELP`` (vllm, llamacpp, METHOD:/path ...); None = decide from the server."""
    echo: IO[str] | None = None
    """Where AIPerf's output is streamed (nowhere but its log when None)."""
    connections: str | None = None
    """``auto|pooled|close`` (``connections.OPTION_HELP``); None = decide from the server."""
    sessions: conversation.SessionLoad | None = None
    """How a conversation population's sessions are replayed (think time, cache block);
    None = the defaults. A single-request population ignores it."""


@dataclass
class _Case:
    """The running case: its request, its guard, and what has been produced so far."""

    request: BenchClientRequest
    options: CaseOptions
    engine: LoadEngine
    guard: interrupts.Guard
    artifacts: list[RawArtifact] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    exit_code: int | None = None
    metrics_window: list[server_metrics.Scrape | None] = field(default_factory=list)
    """The server's /metrics right before the load started and right after it ended."""
    aiperf_env: dict[str, str] = field(default_factory=dict)
    """AIPerf's environment from the connection choice (connections.json)."""
    simulator: str | None = None
    """Our simulator's version when the server announced itself as it (GET /v1/models):
    then, and only then, the case asks it for the truth of its requests."""
    replay: sessions.Replay | None = None
    """A conversation case's sessions (None: single requests)."""

    @property
    def root(self) -> Path:
        return self.request.artifact_dir

    def add(self, name: str, kind: str, path: Path) -> None:
        if path.exists() and all(a.path != path for a in self.artifacts):
            self.artifacts.append(RawArtifact(name=name, kind=kind, path=path))

    def write_json(self, filename: str, kind: str, document: Any) -> Path:
        path = self.root / filename
        write_bytes_atomic(path, orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
        self.add(path.stem, kind, path)
        return path

    def remaining(self) -> float:
        """Seconds of budget left for the load (the result's reserve kept back)."""
        return self.guard.remaining() - RESULT_RESERVE_SECONDS


def run_case(
    request: BenchClientRequest,
    options: CaseOptions | None = None,
    engine: LoadEngine | None = None,
) -> BenchClientResult:
    """Run one case on ``engine`` (local AIPerf by default); always returns a result, failed
    ones carrying the error and the artifacts written so far."""
    budget = request.case_budget_seconds
    with interrupts.guard("case", budget, budget_field="case_budget_seconds") as guard:
        case = _Case(request, options or CaseOptions(), engine or LocalEngine(), guard)
        try:
            return _run(case)
        except InferlabError as exc:
            with guard.deferred():
                return _failed(case, str(exc))


def planned_config(request: BenchClientRequest) -> dict[str, Any]:
    """The AIPerf config a case with no reset after warmup runs, for its whole budget
    (nothing written): what a dry run on another engine translates."""
    plan = aiperf_config.build_plan(
        request,
        aiperf_dir=aiperf_dir(request),
        timeout_seconds=interrupts.clamped(request.case_budget_seconds) - RESULT_RESERVE_SECONDS,
    )
    return plan.config


def aiperf_dir(request: BenchClientRequest) -> Path:
    """Where AIPerf's outputs of the case lie (written there, or fetched there)."""
    return request.artifact_dir / AIPERF_DIR


def _run(case: _Case) -> BenchClientResult:
    request, guard = case.request, case.guard
    _make_artifact_dir(request.artifact_dir)
    tokenizer_dir(request.model.locator)
    guard.doing = "checking the population"
    check_population(request)
    case.replay = sessions.replay_of(request, case.options.sessions)
    guard.doing = "asking the server"
    target = _reset_target(case)
    case.engine.check(request, target)
    aiperf_env: dict[str, str] = {}
    if case.engine.reaches_server_from_here:
        case.simulator = probe.check_listening(
            request.endpoint.base_url,
            timeout=min(5.0, max(0.5, case.remaining())),
            served_name=request.model.served_name,
        )
        aiperf_env = _choose_connections(case)
    if target is not None and target.per_slot:
        _check_llamacpp_prompt_cache(case, target)
    after_warmup = target is not None and request.case.warmup_request_count > 0
    record = case.engine.hosts_our_plugin and Load.of(request.case.load_shape).rate_limited
    config_path, config = _write_plan(case, reset_after_warmup=after_warmup, record_schedule=record)
    if target is not None and not after_warmup:
        guard.doing = "resetting the prefix cache"
        _reset_now(case, target)
    run = EngineRun(
        request=request,
        config=config,
        config_path=config_path,
        guard=guard,
        stop_at=time.monotonic() + case.remaining() - STOP_RESERVE_SECONDS,
        reset_after_warmup=target if after_warmup else None,
        schedule_path=case.root / PLANNED_SCHEDULE_FILE if record else None,
        echo=case.options.echo,
        aiperf_env=aiperf_env,
    )
    guard.doing = "AIPerf was running"
    outcome = _run_engine(case, run)
    guard.doing = "reading AIPerf's outputs"
    return _measure(case, outcome, reset_checked=target is not None)


def _make_artifact_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(
            path,
            f"artifact_dir: cannot create it ({exc.strerror or exc})",
            hint="give a directory this user can create and write",
        ) from exc


def _write_plan(
    case: _Case, *, reset_after_warmup: bool, record_schedule: bool
) -> tuple[Path, dict[str, Any]]:
    """The AIPerf config and the request-body record, written beside the case."""
    replay = None
    if case.replay is not None:
        trace = case.root / conversation.TRACE_FILE
        conversation.write_trace(trace, case.replay.trace)
        case.add("conversation-trace", "inputs", trace)
        replay = aiperf_config.SessionReplay(trace_path=trace, sessions=case.replay.trace_sessions)
    plan = aiperf_config.build_plan(
        case.request,
        aiperf_dir=aiperf_dir(case.request),
        timeout_seconds=case.remaining(),
        reset_after_warmup=reset_after_warmup,
        record_schedule=record_schedule,
        our_plugins=case.engine.hosts_our_plugin,
        sessions=replay,
    )
    config_path = case.write_json(AIPERF_CONFIG_FILE, "config", plan.config)
    case.write_json(REQUEST_BODY_FILE, "request_body", plan.body.as_json())
    if case.request.population is not None:
        case.add("population", "inputs", case.request.population.path)
    return config_path, plan.config


def check_population(request: BenchClientRequest) -> None:
    """The population file is the one the request names (sha256) and holds enough entries."""
    if not isinstance(request.definition.request_source, DatasetSource):
        return
    population = request.population
    if population is None:
        raise PopulationError("population: a dataset request source needs a population")
    data = _read_regular(population.path)
    digest = hashlib.sha256(data).hexdigest()
    if digest != population.sha256:
        raise DigestMismatchError(f"population {population.path}", population.sha256, digest)
    if conversation.is_conversation_population(population.path):
        sessions.check_session_count(request, data)
        return
    needed, present = aiperf_config.total_entries(request), data.count(b"\n")
    if present < needed:
        raise PopulationError(
            f"population {population.path}: {present} entries, the case needs {needed} "
            f"(warmup {request.case.warmup_request_count} + requests {request.case.request_count})",
            hint="prepare a larger population or lower request_count / warmup_request_count",
        )


def _read_regular(path: Path) -> bytes:
    """A regular file's bytes; a FIFO or device is refused without opening it (it could
    block forever or never end)."""
    problem = readable_file_problem(path)
    if problem is not None:
        raise PopulationError(
            f"population.path {problem}",
            hint="give the population.jsonl written by `inferlab-bench prepare`",
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise PopulationError(
            f"population.path {path}: cannot read ({exc.strerror or exc})"
        ) from exc


def _reset_target(case: _Case) -> reset.ResetTarget | None:
    if not case.request.definition.reset_prefix_cache:
        return None
    option = case.options.prefix_cache_reset
    if option is None:
        # Detection asks the server what it is: first say if nothing is there to ask.
        base_url = case.request.endpoint.base_url
        probe.check_listening(base_url, timeout=min(5.0, max(0.5, case.remaining())))
        return reset.detect_target(base_url)
    target = reset.parse_reset_option(option)
    if target is None:
        raise PrefixCacheResetError(
            f"definition.reset_prefix_cache is true but --prefix-cache-reset {option} "
            "names a server without a prefix-cache reset",
            hint="run the case without reset_prefix_cache, or give the reset method and path",
        )
    return target


def _choose_connections(case: _Case) -> dict[str, str]:
    """AIPerf's connection settings for this server, recorded as connections.json."""
    choice = connections.choose(
        case.request.endpoint.base_url,
        case.options.connections,
        timeout=min(5.0, max(0.5, case.remaining())),
    )
    shape = case.request.case.load_shape
    concurrency = shape.concurrency if isinstance(shape, ConcurrencyLimited) else None
    if case.engine.hosts_our_plugin:
        choice = switches.with_preconnect(choice, case.request.endpoint.base_url, concurrency)
        choice = switches.with_wire_start(choice)
    case.write_json("connections.json", "config", choice.as_json())
    case.aiperf_env = dict(choice.env)
    return dict(choice.env)


def _check_llamacpp_prompt_cache(case: _Case, target: reset.ResetTarget) -> None:
    """A slot erase leaves llama.cpp's RAM prompt cache warm: refuse the case if it is on."""
    request = case.request
    found = llamacpp.probe_prompt_cache(
        request.endpoint.base_url,
        request.model.served_name,
        request.endpoint.chat_completions_path,
        target,
        timeout=min(reset.DEFAULT_TIMEOUT_SECONDS, max(0.5, case.remaining())),
    )
    case.write_json("prompt-cache-probe.json", "reset_evidence", found.as_json())
    llamacpp.refuse_if_on(found)


def _reset_now(case: _Case, target: reset.ResetTarget) -> None:
    """Reset every server the engine's load reaches (every slot of each, where the reset is
    per slot); nothing runs between this and the first profiling request (no warmup)."""
    timeout = min(reset.DEFAULT_TIMEOUT_SECONDS, max(0.5, case.remaining()))
    calls = [
        call
        for url in case.engine.reset_urls(case.request)
        for call in reset.reset_all(url, target, timeout=timeout)
    ]
    path = case.root / RESET_EVIDENCE_FILE
    reset.write_evidence(path, target, calls, when="before-run")
    case.add("reset-evidence", "reset_evidence", path)
    for call in calls:
        reset.raise_unless_ok(call)


def _run_engine(case: _Case, run: EngineRun) -> EngineOutcome:
    aiperf_dir(case.request).mkdir(parents=True, exist_ok=True)
    scrape = case.engine.reaches_server_from_here
    base_url = case.request.endpoint.base_url
    if scrape:
        case.metrics_window = [
            server_metrics.scrape(base_url, timeout=min(5.0, max(0.5, case.remaining())))
        ]
    try:
        outcome = case.engine.run(run)
    finally:
        for artifact in run.artifacts:
            case.add(artifact.name, artifact.kind, artifact.path)
        _collect_outputs(case)
    if scrape and outcome.stopped_by is None:
        case.metrics_window.append(server_metrics.scrape(base_url, timeout=5.0))
    case.command, case.exit_code = outcome.command, outcome.exit_code
    case.add("aiperf-output", "log", outcome.log_path)
    if outcome.stopped_by is not None:
        raise case.guard.stopped("deadline" if outcome.stopped_by == "deadline" else "SIGTERM")
    if run.reset_after_warmup is not None:
        _check_hook_reset(case, outcome)
    records = aiperf_outputs(case.root)["records"][1]
    if outcome.exit_code != 0 and not records.is_file():
        raise _exit_error(outcome)
    return outcome


def _collect_outputs(case: _Case) -> None:
    for name, (kind, path) in aiperf_outputs(case.root).items():
        case.add(name, kind, path)
    case.add("reset-evidence", "reset_evidence", case.root / RESET_EVIDENCE_FILE)


def _exit_error(outcome: EngineOutcome) -> LoadGeneratorError:
    return LoadGeneratorError(
        f"AIPerf exited with code {outcome.exit_code}: {failure_reason(outcome.log_path)}",
        hint=f"see {outcome.log_path}",
    )


def _check_hook_reset(case: _Case, outcome: EngineOutcome) -> None:
    calls = reset.read_evidence(case.root / RESET_EVIDENCE_FILE)
    if calls:
        for call in calls:  # one per slot where the reset is per slot
            reset.raise_unless_ok(call)
        return
    if outcome.exit_code != 0:
        raise _exit_error(outcome)  # AIPerf failed before warmup ended: say why
    raise PrefixCacheResetError(
        "the prefix-cache reset after warmup never ran (warmup did not finish?)",
        hint=f"see {outcome.log_path}",
    )


def _measure(case: _Case, outcome: EngineOutcome, *, reset_checked: bool) -> BenchClientResult:
    request = case.request
    outputs = aiperf_outputs(case.root)
    records = as_read = read_records(outputs["records"][1])
    if case.replay is not None:
        sessions.check_records(case.replay, records, outputs["raw-records"][1])
        records = sessions.turn_keyed(records)
    _check_integrity(case, records)
    profiling = records.profiling
    # AIPerf exits 1 and writes no summary when every request failed: still a measurement.
    all_failed = bool(np.all(profiling.has_error | profiling.was_cancelled))
    if outcome.exit_code != 0 and not all_failed:
        raise _exit_error(outcome)
    summary_path = outputs["summary"][1]
    summary = (
        {} if all_failed and not summary_path.exists() else read_json_file(summary_path, "summary")
    )
    slo_evidence = _slo(case, records, summary)
    completed = int(np.sum(~(profiling.has_error | profiling.was_cancelled)))
    scope = metrics.MetricScope(
        tpot_applicable=_tpot_applicable(request),
        latencies_measured=completed > 0,
        cache_reads_reported=profiling.reports(tags.CACHED_PROMPT_TOKENS)
        and metrics.summary_value(summary, metrics.CACHE_READ_TAG) is not None,
        slo_set=request.definition.request_slo is not None,
    )
    normalized = metrics.normalize(summary, scope, slo_evidence)
    population = _population_lines(request)
    if case.replay is not None:
        population = sessions.turn_keyed_lines(case.replay, population)
    bounds = _prefix_bounds(case, records, population) if reset_checked else None
    client_usage = _client_usage(case, outcome)
    truth = _server_truth(case, records)
    document = _write_validity(case, records, population, bounds, client_usage, truth)
    cold = document.cache.cold_start
    if case.replay is not None:
        prompts = _prompt_ids_of(request, population)
        sessions_doc = sessions.sessions_document(
            case.replay, as_read.profiling, cold_start_expected=reset_checked, prompts=prompts
        )
        case.write_json(sessions.SESSIONS_FILE, "summary", sessions_doc)
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


def _check_integrity(case: _Case, records: CaseRecords) -> None:
    shape = case.request.case
    if case.replay is not None:
        sessions.check_warmup_complete(case.replay, records.warmup)
        slo.check_profiling_records(records.profiling)
        return
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
        native_good_count=metrics.summary_value(summary, tags.GOOD_REQUEST_COUNT),
    )


def _population_lines(request: BenchClientRequest) -> list[dict[str, Any]] | None:
    """The replayed population's lines (None for AIPerf's synthetic prompts)."""
    population = request.population
    if not isinstance(request.definition.request_source, DatasetSource) or population is None:
        return None
    return _json_lines(population.path)


def _prefix_bounds(
    case: _Case, records: CaseRecords, population: list[dict[str, Any]] | None
) -> tuple[int, ...] | None:
    """What each first-wave request may hit after the reset: its prompt's prefix shared with
    earlier ones, which only this stage can tokenize (validity judges the wave with them)."""
    request = case.request
    # As validity judges it: over the records (a conversation case's are turns, not sessions).
    size = Load.of(request.case.load_shape).first_wave(len(records.profiling))
    wave = validity.first_wave(validity.phase_records(records.profiling), size)
    if wave is None or population is None:
        return None
    by_session = {line.get("session_id"): line.get("messages") for line in population}
    found = [by_session.get(session) for session in wave]
    conversations = [messages for messages in found if isinstance(messages, list)]
    if len(conversations) != len(wave):
        return None
    prompts = prefix.prompt_token_ids(
        request.model.locator, conversations, _template_kwargs(request)
    )
    return tuple(prefix.prefix_bounds(prompts))


def _template_kwargs(request: BenchClientRequest) -> dict[str, Any]:
    kwargs = aiperf_config.build_request_body(request).body.get("chat_template_kwargs")
    return kwargs if isinstance(kwargs, dict) else {}


def _prompt_ids_of(
    request: BenchClientRequest, population: list[dict[str, Any]] | None
) -> sessions.PromptIds:
    """A conversation case's prompt token ids by turn key, tokenized on demand."""
    messages = {str(line["session_id"]): line["messages"] for line in population or []}

    def prompt_ids(keys: list[str]) -> list[list[int]]:
        conversations = [messages[key] for key in keys]
        return prefix.prompt_token_ids(
            request.model.locator, conversations, _template_kwargs(request)
        )

    return prompt_ids


def _write_validity(
    case: _Case,
    records: CaseRecords,
    population: list[dict[str, Any]] | None,
    prefix_bounds: tuple[int, ...] | None,
    client_usage: validity.ClientUsage | None = None,
    server_truth: list[dict[str, Any]] | None = None,
) -> validity.ValidityDocument:
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
        prefix_bounds=prefix_bounds,
        slo=request.definition.request_slo,
        schedule=_planned_schedule(case),
        client_usage=client_usage,
        server_truth=server_truth,
    )
    case.write_json(VALIDITY_FILE, "validity", document.to_json_dict())
    return document


def _server_truth(case: _Case, records: CaseRecords) -> list[dict[str, Any]] | None:
    """server-truth.jsonl: our simulator's records of the profiling requests, asked only of a
    server that announced itself as it (None: another server, or the truth not given)."""
    if case.simulator is None:
        return None
    ids = [rid for rid in records.profiling.x_request_id if rid]
    found = server_truth.fetch(case.request.endpoint.base_url, ids)
    if isinstance(found, str):  # the verdicts then rest on the calibrated proxies, as anywhere
        return None
    path = case.root / SERVER_TRUTH_FILE
    write_bytes_atomic(path, b"".join(orjson.dumps(r) + b"\n" for r in found))
    case.add(path.stem, "evidence", path)
    return found


def _planned_schedule(case: _Case) -> PlannedSchedule | None:
    """The rate loop's plan as our plugin recorded it (listed as evidence when there is one)."""
    path = case.root / PLANNED_SCHEDULE_FILE
    if not path.is_file():
        return None
    case.add("planned-schedule", "schedule", path)
    return read_schedule(path)


def _client_usage(case: _Case, outcome: EngineOutcome) -> validity.ClientUsage | None:
    """client-usage.json: AIPerf's CPU time and the host's run queue as sampled during the
    run, and the same for the client-cost verdict (None when the load ran out of sight)."""
    series = outcome.usage
    if series is None:
        return None
    case.write_json(CLIENT_USAGE_FILE, "summary", series.as_json())
    return validity.ClientUsage(
        time_ns=series.time_ns,
        cpu_seconds=series.cpu_seconds,
        runnable=series.runnable,
        host_cores=series.host_cores,
        server_on_this_host=usage.is_this_host(case.request.endpoint.host),
        start_at_first_byte=case.aiperf_env.get(WIRE_START_ENV_VAR) == "1",
    )


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
    case.write_json("server-metrics.json", "summary", document)


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


def _failed(case: _Case, message: str) -> BenchClientResult:
    return BenchClientResult(
        status=ClientStatus.FAILED,
        native_command=case.command,
        native_exit_code=case.exit_code,
        raw_artifacts=[a for a in case.artifacts if a.path.exists()],
        error=message,
    )

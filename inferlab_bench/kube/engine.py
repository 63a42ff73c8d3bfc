"""The only place that runs ``aiperf kube ...`` and ``kubectl``: submit, watch, cancel, fetch."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from inferlab_bench.atomic import open_for_append
from inferlab_bench.errors import LoadGeneratorError
from inferlab_bench.interrupts import Guard
from inferlab_bench.kube.options import KubeOptions

TERMINAL_PHASES = frozenset({"Completed", "Failed", "Cancelled"})
SYSTEM_STATE_ANNOTATION = "aiperf.nvidia.com/system-state"
# Direct mode: the controller keeps its API up after the run until told to shut down, so the
# JobSet only ends after `results --shutdown`; these controller states mean "results next".
_DIRECT_DONE_STATES = frozenset({"stopping", "shutdown"})
_COMMAND_TIMEOUT = 300.0
_CANCEL_TIMEOUT = 60.0
_MAX_STATUS_FAILURES = 5


@dataclass(frozen=True)
class CommandRun:
    """One command we ran, as recorded in the engine log."""

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str
    stderr: str


@dataclass(frozen=True)
class JobOutcome:
    """How the job ended: its last phase, whether we stopped it, and what we ran."""

    phase: str
    stopped_by: str | None
    """None, "deadline" or "signal"."""
    results_fetched: bool
    commands: tuple[CommandRun, ...]
    submit: CommandRun | None = None


@dataclass
class _Log:
    commands: list[CommandRun] = field(default_factory=list)
    path: Path | None = None

    def add(self, run: CommandRun) -> CommandRun:
        self.commands.append(run)
        if self.path is not None:
            entry = f"$ {' '.join(run.argv)}\n[exit {run.exit_code}]\n{run.stdout}{run.stderr}\n"
            with open_for_append(self.path) as handle:
                handle.write(entry.encode("utf-8"))
        return run


def run_command(argv: Sequence[str], timeout: float = _COMMAND_TIMEOUT) -> CommandRun:
    """Run one command to completion; a missing program or a hang is a LoadGeneratorError."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=max(timeout, 1.0), check=False
        )
    except FileNotFoundError as exc:
        raise LoadGeneratorError(
            f"{argv[0]}: program not found",
            hint="install kubectl and aiperf==0.13.0 on this machine, or fix PATH",
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise LoadGeneratorError(f"{' '.join(argv[:3])}: no answer after {timeout:.0f} s") from exc
    return CommandRun(tuple(argv), done.returncode, done.stdout, done.stderr)


def _manage_flags(options: KubeOptions) -> list[str]:
    flags = ["--namespace", options.namespace]
    if options.kubeconfig is not None:
        flags += ["--kubeconfig", str(options.kubeconfig)]
    return flags


def _kubectl_config(options: KubeOptions) -> list[str]:
    return [] if options.kubeconfig is None else ["--kubeconfig", str(options.kubeconfig)]


def validate_command(cr_path: Path, options: KubeOptions) -> list[str]:
    return [*options.aiperf_command, "kube", "validate", "--strict", str(cr_path)]


def generate_raw_command(cr_path: Path, options: KubeOptions) -> list[str]:
    return [
        *options.aiperf_command,
        "kube",
        "generate",
        "--no-operator",
        "--config",
        str(cr_path),
        *_manage_flags(options),
    ]


def submit_command(cr_path: Path, options: KubeOptions) -> list[str]:
    mode = "--operator" if options.operator else "--no-operator"
    return [
        *options.aiperf_command,
        "kube",
        "profile",
        "--config",
        str(cr_path),
        mode,
        "--detach",
        "--skip-endpoint-check",
        *_manage_flags(options),
    ]


def status_command(name: str, options: KubeOptions) -> list[str]:
    if options.operator:
        resource, path = f"aiperfjob/{name}", "{.status.phase}"
    else:
        annotation = SYSTEM_STATE_ANNOTATION.replace(".", "\\.")
        resource = f"jobset/aiperf-{name}"
        path = "{.status.terminalState}/{.metadata.annotations." + annotation + "}"
    return [
        *options.kubectl_command,
        "get",
        resource,
        "-n",
        options.namespace,
        "-o",
        f"jsonpath={path}",
        *_kubectl_config(options),
    ]


def cancel_command(name: str, options: KubeOptions) -> list[str]:
    """``aiperf kube cancel`` (operator); without the operator there is no CR, so the JobSet
    is deleted, which is what the operator's cancel handler does to it."""
    if options.operator:
        return [*options.aiperf_command, "kube", "cancel", name, *_manage_flags(options)]
    return [
        *options.kubectl_command,
        "delete",
        f"jobset/aiperf-{name}",
        "-n",
        options.namespace,
        "--wait=false",
        *_kubectl_config(options),
    ]


def results_command(name: str, output: Path, options: KubeOptions) -> list[str]:
    argv = [
        *options.aiperf_command,
        "kube",
        "results",
        name,
        "--output",
        str(output),
        *_manage_flags(options),
    ]
    return argv if options.operator else [*argv, "--from-pods", "--shutdown"]


def parse_phase(stdout: str, *, operator: bool) -> str:
    """The terminal phase in a status answer, or "" while the job is still going."""
    text = stdout.strip()
    if operator:
        return text if text in TERMINAL_PHASES else ""
    terminal, _, state = text.partition("/")
    if terminal in ("Completed", "Failed"):
        return terminal
    return "Completed" if state in _DIRECT_DONE_STATES else ""


def checked(run: CommandRun, what: str) -> CommandRun:
    """Turn a non-zero exit into a LoadGeneratorError carrying the command's last words."""
    if run.exit_code != 0:
        tail = (run.stderr or run.stdout).strip().splitlines()[-3:]
        raise LoadGeneratorError(
            f"{what} failed (exit {run.exit_code}): {' | '.join(tail) or 'no output'}"
        )
    return run


def generate_raw_manifests(cr_path: Path, options: KubeOptions) -> str:
    """AIPerf's own ``kube generate --no-operator`` for this CR (RBAC, ConfigMap, JobSet)."""
    run = run_command(generate_raw_command(cr_path, options))
    return checked(run, "aiperf kube generate --no-operator").stdout


def validate_strict(cr_path: Path, options: KubeOptions) -> CommandRun:
    run = run_command(validate_command(cr_path, options))
    return checked(run, "aiperf kube validate --strict")


def run_job(
    name: str,
    cr_path: Path,
    results_dir: Path,
    deadline: float,
    options: KubeOptions,
    log_path: Path | None = None,
    *,
    guard: Guard,
) -> JobOutcome:
    """Submit the job, wait for a terminal phase, cancel on ``deadline`` or when the stage's
    guard fires (SIGTERM/SIGINT, the hard deadline), then fetch the results (for a completed
    job retried until the deadline: the operator harvests them after the end)."""
    log = _Log(path=log_path)
    submit: CommandRun | None = None
    stopped_by: str | None = None
    phase = ""
    with guard.deferred() as stop:
        submit = log.add(run_command(submit_command(cr_path, options), _remaining(deadline)))
        if not stop.is_set():
            checked(submit, "aiperf kube profile")
            phase = _wait_terminal(name, deadline, options, log, stop)
        if stop.is_set():
            stopped_by = "deadline" if guard.deadline_passed else "signal"
        if not phase:
            stopped_by = stopped_by or "deadline"
            log.add(run_command(cancel_command(name, options), _CANCEL_TIMEOUT))
            phase = "Cancelled"
        # Only a completed job's results are worth waiting for; others are fetched once.
        retry = phase == "Completed" and stopped_by is None
        fetched = _fetch_results(name, results_dir, deadline, options, log, retry=retry)
    return JobOutcome(phase, stopped_by, fetched, tuple(log.commands), submit)


def _wait_terminal(
    name: str, deadline: float, options: KubeOptions, log: _Log, stop: threading.Event
) -> str:
    """The terminal phase, or "" when the deadline passes or a stop is asked first."""
    failures = 0
    while time.monotonic() < deadline and not stop.is_set():
        run = run_command(status_command(name, options), min(_remaining(deadline), 60.0))
        if run.exit_code == 0:
            failures = 0
            phase = parse_phase(run.stdout, operator=options.operator)
            if phase:
                log.add(run)
                return phase
        else:
            failures += 1
            log.add(run)
            if failures >= _MAX_STATUS_FAILURES:
                checked(run, f"kubectl get (status of {name})")
        stop.wait(max(0.0, min(options.poll_seconds, _remaining(deadline))))
    return ""


def _fetch_results(
    name: str, output: Path, deadline: float, options: KubeOptions, log: _Log, *, retry: bool
) -> bool:
    while True:
        run = log.add(run_command(results_command(name, output, options)))
        if run.exit_code == 0:
            return True
        if not retry or _remaining(deadline) <= options.poll_seconds:
            return False
        time.sleep(options.poll_seconds)


def _remaining(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())

"""Names that one part writes and another reads: kept here once.

The preparation stage writes a population and its evidence side by side; the case stage
replays the population and reads the evidence back to reconcile token counts. A case
directory holds the case's own files and AIPerf's outputs under ``aiperf/``; a human run
adds the request and result beside them, which the report reads back.
"""

from __future__ import annotations

import os
from pathlib import Path

POPULATION_FILE = "population.jsonl"
EVIDENCE_FILE = "population-evidence.jsonl"
"""Per entry: source index and id, messages, held-out target, input and output tokens."""


def session_id(position: int) -> str:
    """The session id of population entry ``position``: ``inferlab-NNNNNNNN``."""
    return f"inferlab-{position:08d}"


def evidence_path(population: Path) -> Path:
    """Where the evidence of a population file lies (next to it)."""
    return population.with_name(EVIDENCE_FILE)


# --- A case directory (``artifact_dir``). ---
AIPERF_DIR = "aiperf"
"""AIPerf's own outputs (written there locally, or fetched there from Kubernetes)."""
AIPERF_PREFIX = "profile"
"""AIPerf's artifact prefix: ``profile.json`` (summary), ``profile.jsonl`` (records)."""
AIPERF_CONFIG_FILE = "aiperf-config.json"
REQUEST_BODY_FILE = "request-body.json"
AIPERF_CONSOLE_LOG = "aiperf-output.log"
RESET_EVIDENCE_FILE = "reset-evidence.json"
PROFILING_START_METRICS = "server-metrics-profiling-start.json"
"""The server's /metrics as our AIPerf plugin read it between warmup and profiling."""
PLANNED_SCHEDULE_FILE = "planned-schedule.json"
"""Every interval AIPerf's timing loop drew in the profiling phase (rate loads), as our
plugin recorded it: when each request was due."""
VALIDITY_FILE = "validity.json"
CLIENT_USAGE_FILE = "client-usage.json"
"""AIPerf's CPU time and the host's run queue, sampled while the load ran."""
SERVER_TRUTH_FILE = "server-truth.jsonl"
"""Our simulator's ground truth of the profiling requests (only against the simulator)."""

# --- A human run directory (one case, or one per sweep point / trial). ---
REQUEST_FILE = "request.json"
RESULT_FILE = "result.json"
SWEEP_FILE = "sweep.json"
TRIALS_FILE = "trials.json"
RECORDS_PARQUET = "records.parquet"


def aiperf_outputs(artifact_dir: Path) -> dict[str, tuple[str, Path]]:
    """AIPerf's outputs of a case as raw artifacts: name -> (kind, path)."""
    out = artifact_dir / AIPERF_DIR
    return {
        "aiperf-log": ("log", out / "logs" / "aiperf.log"),
        "summary": ("summary", out / f"{AIPERF_PREFIX}.json"),
        "records": ("records", out / f"{AIPERF_PREFIX}.jsonl"),
        "raw-records": ("raw_records", out / f"{AIPERF_PREFIX}_raw.jsonl"),
        "phase-manifest": ("phase_manifest", out / "phase_manifest.json"),
    }


def cache_root() -> Path:
    """Our cache: ``$XDG_CACHE_HOME/inferlab`` (``~/.cache/inferlab`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "inferlab"


CATALOG_DIR_ENV = "INFERLAB_CATALOG_DIR"
"""A catalog directory to use instead of the packaged one (``prepare.catalog``)."""

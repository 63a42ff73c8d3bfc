"""The one bridge from the case stage to the validity checks: its records in, a document out.

The case stage's parsed records (``inferlab_bench.case.records.CaseRecords``) satisfy the
two protocols below by their shape, so this package never imports the case stage and
the case stage may call ``assess_case`` to write validity.json without an import cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from inferlab_bench import metric_tags as tags
from inferlab_bench.errors import PopulationError
from inferlab_bench.protocol import BenchLoadInput, BenchRequestSloInput
from inferlab_bench.validity.assess import DEFAULT_TOLERANCES, CaseFacts, Tolerances, assess
from inferlab_bench.validity.client_cost import ClientUsage
from inferlab_bench.validity.failures import ErrorClass, classify
from inferlab_bench.validity.inputs import Expectations, FloatArray, Int64Array, PhaseRecords
from inferlab_bench.validity.report import ValidityDocument
from inferlab_bench.validity.schedule import PlannedSchedule


class RecordColumns(Protocol):
    """One phase's records as aligned columns (what ``case.records.RecordColumns`` has)."""

    @property
    def session_num(self) -> npt.NDArray[Any]: ...

    @property
    def conversation_id(self) -> Sequence[str | None]: ...

    @property
    def credit_issued_ns(self) -> npt.NDArray[Any]: ...

    @property
    def start_ns(self) -> npt.NDArray[Any]: ...

    @property
    def end_ns(self) -> npt.NDArray[Any]: ...

    @property
    def was_cancelled(self) -> npt.NDArray[Any]: ...

    @property
    def has_error(self) -> npt.NDArray[Any]: ...

    @property
    def error_message(self) -> Sequence[str | None]: ...

    @property
    def error_code(self) -> npt.NDArray[Any] | None: ...

    @property
    def error_type(self) -> Sequence[str | None] | None: ...

    @property
    def worker_id(self) -> Sequence[str | None] | None: ...

    @property
    def x_request_id(self) -> Sequence[str | None]: ...

    @property
    def first_burst_ms(self) -> npt.NDArray[Any] | None: ...

    @property
    def largest_burst_ms(self) -> npt.NDArray[Any] | None: ...

    def __len__(self) -> int: ...

    def metric(self, tag: str) -> npt.NDArray[Any]: ...


class CaseRecords(Protocol):
    """The records split by phase (what ``case.records.CaseRecords`` has)."""

    @property
    def warmup(self) -> RecordColumns: ...

    @property
    def profiling(self) -> RecordColumns: ...


def phase_records(columns: RecordColumns) -> PhaseRecords:
    """The case stage's columns of one phase as validity inputs."""
    good = _floats(columns, tags.GOOD_REQUEST_COUNT)
    return PhaseRecords(
        session_ids=tuple(
            cid if cid is not None else f"session-{num}"
            for cid, num in zip(columns.conversation_id, columns.session_num, strict=True)
        ),
        start_ns=np.asarray(columns.start_ns, dtype=np.int64),
        end_ns=np.asarray(columns.end_ns, dtype=np.int64),
        succeeded=~np.asarray(columns.has_error, dtype=bool)
        & ~np.asarray(columns.was_cancelled, dtype=bool),
        prompt_tokens=_floats(columns, tags.PROMPT_TOKENS),
        output_tokens=_floats(columns, tags.OUTPUT_TOKENS),
        cached_prompt_tokens=_floats(columns, tags.CACHED_PROMPT_TOKENS),
        credit_issued_ns=_credit_issued(columns),
        good=None if np.isnan(good).all() else good == 1,
        client_send_ms=_client_send(columns),
        connect_ms=_connect(columns),
        ttft_ms=_floats(columns, tags.TTFT),
        itl_ms=_floats(columns, tags.ITL),
        ttst_ms=_floats(columns, tags.TTST),
        first_burst_ms=_measured(columns.first_burst_ms),
        largest_burst_ms=_measured(columns.largest_burst_ms),
        latency_ms=_floats(columns, tags.REQUEST_LATENCY),
        error_class=_error_classes(columns),
        error_message=tuple(columns.error_message),
        worker_ids=_worker_ids(columns),
        request_ids=tuple(columns.x_request_id) if len(columns.x_request_id) else None,
    )


def _measured(column: npt.NDArray[Any] | None) -> FloatArray | None:
    """A per-request figure, or None when no record has it."""
    if column is None or not np.isfinite(column).any():
        return None
    return np.asarray(column, dtype=np.float64)


def _worker_ids(columns: RecordColumns) -> tuple[str, ...] | None:
    # AIPerf's metadata.worker_id; unknown for the phase when any record lacks one.
    ids = columns.worker_id
    if ids is None or len(ids) != len(columns) or any(wid is None for wid in ids):
        return None
    return tuple(str(wid) for wid in ids)


def _error_classes(columns: RecordColumns) -> tuple[str | None, ...]:
    """Per record: None when it succeeded, else its ``failures.ErrorClass`` value."""
    n = len(columns)
    codes = columns.error_code if columns.error_code is not None else np.full(n, -1)
    types = columns.error_type if columns.error_type is not None else [None] * n
    has_error = np.asarray(columns.has_error, dtype=bool)
    cancelled = np.asarray(columns.was_cancelled, dtype=bool)
    classes: list[str | None] = []
    for i in range(n):
        if has_error[i]:
            code = int(codes[i])
            found = classify(None if code < 0 else code, types[i], columns.error_message[i])
            classes.append(found.value)
        else:
            classes.append(ErrorClass.CANCELLED.value if cancelled[i] else None)
    return tuple(classes)


def _client_send(columns: RecordColumns) -> FloatArray | None:
    """aiohttp's request start -> body written per request (0 where not traced; None if none).

    Not blocked + connecting + sending: the sending span starts before aiohttp asks its pool
    for a connection, so it holds the other two already (``metric_tags.CLIENT_SEND``).
    """
    sending = _floats(columns, tags.CLIENT_SEND)
    if len(columns) == 0 or np.isnan(sending).all():
        return None
    total: FloatArray = np.nan_to_num(sending)
    return total


def _connect(columns: RecordColumns) -> FloatArray | None:
    """The TCP connect inside each request's send (0 where a connection was reused)."""
    connecting = _floats(columns, tags.CONNECTING)
    if len(columns) == 0 or np.isnan(connecting).all():
        return None
    found: FloatArray = np.nan_to_num(connecting)
    return found


def _floats(columns: RecordColumns, tag: str) -> FloatArray:
    return np.asarray(columns.metric(tag), dtype=np.float64)


def _credit_issued(columns: RecordColumns) -> Int64Array | None:
    # AIPerf's metadata.credit_issued_ns; -1 marks a record without one (e.g. fixed schedules),
    # and then the planned send times are unknown for the phase as a whole.
    issued = np.asarray(columns.credit_issued_ns, dtype=np.int64)
    if len(issued) != len(columns) or np.any(issued < 0):
        return None
    return issued


def expectations_from_population(
    population: Iterable[Mapping[str, Any]], evidence: Iterable[Mapping[str, Any]] | None
) -> Expectations:
    """Planned tokens per session: outputs from population lines, inputs from their evidence.

    Evidence lines are in population order (one per entry); each carries ``input_tokens``.
    """
    lines = list(population)
    outputs = {str(line["session_id"]): int(line["output_length"]) for line in lines}
    if evidence is None:
        return Expectations(output_tokens=outputs)
    entries = list(evidence)
    if len(entries) != len(lines):
        raise PopulationError(
            f"population evidence: {len(entries)} entries for {len(lines)} population lines",
            hint="population.jsonl and its evidence come from one prepare run",
        )
    inputs = {
        str(line["session_id"]): int(entry["input_tokens"])
        for line, entry in zip(lines, entries, strict=True)
        if "input_tokens" in entry
    }
    return Expectations(input_tokens=inputs, output_tokens=outputs)


def assess_case(
    records: CaseRecords,
    load: BenchLoadInput,
    *,
    expectations: Expectations | None,
    population_sha256: str | None,
    reset_requested: bool,
    prefix_bounds: tuple[int, ...] | None = None,
    slo: BenchRequestSloInput | None = None,
    schedule: PlannedSchedule | None = None,
    tolerances: Tolerances = DEFAULT_TOLERANCES,
    client_usage: ClientUsage | None = None,
    server_truth: Sequence[Mapping[str, Any]] | None = None,
) -> ValidityDocument:
    """The validity document of one case from the case stage's parsed records.

    ``prefix_bounds`` are the first wave's shared prompt prefixes (``CaseFacts``), which only
    the case stage can compute; the cold-start judgement itself is made here.
    ``server_truth``: our simulator's records of these requests (``case.server_truth``); with
    them the verdicts they can decide are decided by what they measured.
    """
    warmup = phase_records(records.warmup) if len(records.warmup) else None
    facts = CaseFacts(
        load=load,
        expectations=expectations,
        population_sha256=population_sha256,
        reset_requested=reset_requested,
        prefix_bounds=prefix_bounds,
        slo=slo,
        schedule=schedule,
        client_usage=client_usage,
        server_truth=None if server_truth is None else tuple(server_truth),
    )
    return assess(phase_records(records.profiling), warmup, facts, tolerances)

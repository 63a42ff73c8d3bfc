"""The one bridge from the case stage to the validity checks: its records in, a document out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from inferlab_bench.case.records import CaseRecords, RecordColumns
from inferlab_bench.case.validity import ColdStartVerdict
from inferlab_bench.errors import PopulationError
from inferlab_bench.protocol import BenchLoadInput
from inferlab_bench.validity.assess import DEFAULT_TOLERANCES, CaseFacts, Tolerances, assess
from inferlab_bench.validity.inputs import Expectations, Int64Array, PhaseRecords
from inferlab_bench.validity.report import ValidityDocument


def phase_records(columns: RecordColumns) -> PhaseRecords:
    """The case stage's columns of one phase as validity inputs."""
    good = columns.metric("good_request_count")
    return PhaseRecords(
        session_ids=tuple(cid if cid is not None else f"session-{num}"
                          for cid, num in zip(columns.conversation_id, columns.session_num,
                                              strict=True)),
        start_ns=columns.start_ns,
        end_ns=columns.end_ns,
        succeeded=~columns.has_error & ~columns.was_cancelled,
        prompt_tokens=columns.metric("usage_prompt_tokens"),
        output_tokens=columns.metric("output_sequence_length"),
        cached_prompt_tokens=columns.metric("usage_prompt_cache_read_tokens"),
        credit_issued_ns=_credit_issued(columns),
        good=None if np.isnan(good).all() else good == 1,
    )


def _credit_issued(columns: RecordColumns) -> Int64Array | None:
    # Read only if the case parser carries AIPerf's metadata.credit_issued_ns (-1 = absent).
    issued = getattr(columns, "credit_issued_ns", None)
    if issued is None or len(issued) != len(columns) or np.any(np.asarray(issued) < 0):
        return None
    return np.asarray(issued, dtype=np.int64)


def expectations_from_population(population: Iterable[Mapping[str, Any]],
                                 evidence: Iterable[Mapping[str, Any]] | None) -> Expectations:
    """Planned tokens per session: outputs from population lines, inputs from their evidence.

    Evidence lines are in population order (one per entry); each carries ``input_tokens``.
    """
    lines = list(population)
    outputs = {str(line["session_id"]): int(line["output_length"]) for line in lines}
    if evidence is None:
        return Expectations(output_tokens=outputs)
    entries = list(evidence)
    if len(entries) != len(lines):
        raise PopulationError(f"population evidence: {len(entries)} entries for "
                              f"{len(lines)} population lines",
                              hint="population.jsonl and its evidence come from one prepare run")
    inputs = {str(line["session_id"]): int(entry["input_tokens"])
              for line, entry in zip(lines, entries, strict=True) if "input_tokens" in entry}
    return Expectations(input_tokens=inputs, output_tokens=outputs)


def assess_case(records: CaseRecords, load: BenchLoadInput, *,
                expectations: Expectations | None, population_sha256: str | None,
                reset_requested: bool, cold_start: ColdStartVerdict | None = None,
                tolerances: Tolerances = DEFAULT_TOLERANCES) -> ValidityDocument:
    """The validity document of one case from the case stage's parsed records."""
    warmup = phase_records(records.warmup) if len(records.warmup) else None
    facts = CaseFacts(
        load=load,
        expectations=expectations,
        population_sha256=population_sha256,
        reset_requested=reset_requested,
        post_reset_verdict=None if cold_start is None else cold_start.cold,
    )
    return assess(phase_records(records.profiling), warmup, facts, tolerances)

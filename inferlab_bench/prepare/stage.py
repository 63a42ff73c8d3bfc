"""Preparation stage: acquire, tokenize (or reuse the token table), select, count, write."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferlab_bench import interrupts
from inferlab_bench.errors import (
    DatasetError,
    InferlabError,
    InsufficientEntriesError,
    RequestError,
)
from inferlab_bench.prepare import tokencache
from inferlab_bench.prepare.acquire import Acquired, acquire
from inferlab_bench.prepare.catalog import check_request_catalog, load_entry
from inferlab_bench.prepare.complete import Chosen, Tokenizers, complete_counts, with_counts
from inferlab_bench.prepare.materialize import (
    MATERIALIZATION_IDENTITY,
    UNCOUNTED,
    Conversation,
    Reason,
    output_length,
    parse_conversation,
)
from inferlab_bench.prepare.select import select
from inferlab_bench.prepare.sessions import MATERIALIZATION_IDENTITY as SESSIONS_IDENTITY
from inferlab_bench.prepare.sharegpt import read_records, read_spans
from inferlab_bench.prepare.tokens import ChatTokenizer, fingerprint
from inferlab_bench.prepare.tokentable import TokenTable
from inferlab_bench.prepare.write import Entry, Written, remove_stale, write_outputs
from inferlab_bench.progress import NULL_PROGRESS, ProgressSink
from inferlab_bench.protocol import (
    BenchDatasetPreparationRequest,
    BenchDatasetPreparationResult,
    BenchPopulationInput,
    BenchTokenCountSummary,
    ClientStatus,
    DatasetSource,
)
from inferlab_bench.versions import handshake_facts


@dataclass
class Census:
    """Counts over the whole file, filled in as soon as they are known."""

    candidates: int = 0
    admitted: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Table:
    """The token table and where it came from: built now, or the cached one (``key``)."""

    table: TokenTable
    key: str
    cache_hit: bool
    source_format: str
    tokenizers: Tokenizers
    seconds: float


@dataclass(frozen=True)
class _Counted:
    """The chosen rows, every count exact, and how many lacked one before this run."""

    chosen: list[Chosen]
    counted_now: int


def run_prepare(
    request: BenchDatasetPreparationRequest,
    *,
    progress: ProgressSink = NULL_PROGRESS,
    catalog_dir: Path | None = None,
) -> BenchDatasetPreparationResult:
    """Run preparation; always returns a result (failures carry the error and counts)."""
    census = Census()
    # SIGTERM/SIGINT at any point (download, tokenization) end in a failed result; the
    # download's temp file and the pool's workers are cleaned up on the way out.
    with interrupts.guard("preparation") as guard:
        try:
            return _run(request, census, progress, catalog_dir)
        except InferlabError as exc:
            with guard.deferred():
                return result(request, census, ClientStatus.FAILED, error=str(exc))


def _run(
    request: BenchDatasetPreparationRequest,
    census: Census,
    progress: ProgressSink,
    catalog_dir: Path | None,
) -> BenchDatasetPreparationResult:
    """The six steps, in order (a conversation population's in ``sessionstage``)."""
    started = time.monotonic()
    acquired = _acquire(request, catalog_dir, progress)
    if materialization(request) == SESSIONS_IDENTITY:
        from inferlab_bench.prepare.sessionstage import prepare_sessions

        return prepare_sessions(request, census, acquired, progress, started)
    table = _token_table(request, acquired, progress)
    admitted = _census(table.table, dataset_source(request).output_tokens, census)
    chosen = _select(request, admitted, census)
    counted = _count(request, table, chosen, acquired.path)
    return _write(request, census, acquired, table, counted, started)


def _acquire(
    request: BenchDatasetPreparationRequest, catalog_dir: Path | None, progress: ProgressSink
) -> Acquired:
    """The verified source file, once the request's catalog facts check out; the outputs
    of an earlier preparation in the artifact directory are removed first."""
    source = dataset_source(request)
    entry = load_entry(source.dataset.value, catalog_dir)
    check_request_catalog(source.catalog, entry)
    remove_stale(request.artifact_dir)
    return acquire(entry, request.source_path, progress)


def materialization(request: BenchDatasetPreparationRequest) -> str:
    """The materialization the request asks for: its catalog's identity (the catalog check
    admits our extensions, ``catalog.EXTENSION_MATERIALIZATIONS``)."""
    source = request.request_source
    if isinstance(source, DatasetSource):
        return source.catalog.materialization_identity
    return MATERIALIZATION_IDENTITY


def dataset_source(request: BenchDatasetPreparationRequest) -> DatasetSource:
    if not isinstance(request.request_source, DatasetSource):
        raise RequestError(
            "request_source: preparation needs a dataset source, found kind 'random'",
            hint="random prompts are generated by AIPerf in the case stage; no preparation needed",
        )
    return request.request_source


def template_kwargs(request: BenchDatasetPreparationRequest) -> dict[str, Any]:
    kwargs = request.request_body.get("chat_template_kwargs", {})
    if not isinstance(kwargs, dict):
        raise RequestError(
            f"request_body.chat_template_kwargs: expected an object, found {kwargs!r}"
        )
    return kwargs


def _token_table(
    request: BenchDatasetPreparationRequest, acquired: Acquired, progress: ProgressSink
) -> _Table:
    """The cached token table for this source, tokenizer and limit, else one built now
    (the real tokenizer over every conversation) and cached."""
    started = time.monotonic()
    max_input = dataset_source(request).max_input_tokens
    kwargs = template_kwargs(request)
    tokenizer_id = fingerprint(request.model.locator)
    tokenizers = Tokenizers(request.model.locator, kwargs, tokenizer_id)
    key = tokencache.table_key(acquired.sha256, tokenizer_id, max_input, kwargs)
    cached = tokencache.load_table(key)
    if cached is not None:
        seconds = time.monotonic() - started
        return _Table(cached, key, True, "cached-token-table", tokenizers, seconds)
    from inferlab_bench.prepare.table import build_table  # numpy and pyarrow: a cold run only

    tok = tokenizers()  # loads on a thread while the source is read
    progress.begin("reading dataset", None, unit="")
    source = read_records(acquired.path)
    progress.end()
    table = build_table(source.records, tok, max_input, progress)
    tokencache.store_table(key, table)
    seconds = time.monotonic() - started
    return _Table(table, key, False, source.source_format, tokenizers, seconds)


def _census(table: TokenTable, fixed_output: int | None, census: Census) -> list[tuple[int, str]]:
    """Apply the last rule (short targets) and count everything; return admitted (i, id)."""
    reasons = list(table.reason)
    if fixed_output is None:
        short = Reason.TARGET_SHORTER_THAN_TWO_TOKENS.value
        for position, target in enumerate(table.target_tokens):
            # UNCOUNTED: proved to have at least two tokens
            if target < 2 and target != UNCOUNTED and reasons[position] is None:
                reasons[position] = short
    counts = Counter(reasons)
    census.candidates = table.num_rows
    census.admitted = counts.pop(None, 0)
    census.reasons = {r: n for r, n in sorted(counts.items()) if r is not None and n}
    ids, indices = table.source_id, table.index
    return [(indices[p], ids[p]) for p, reason in enumerate(reasons) if reason is None]


def _select(
    request: BenchDatasetPreparationRequest, admitted: list[tuple[int, str]], census: Census
) -> list[int]:
    """The table positions of the seeded choice; too few admitted entries fail here."""
    chosen = select(request.seed, admitted, request.required_entries)
    if len(chosen) < request.required_entries:
        raise InsufficientEntriesError(request.required_entries, census.admitted)
    return chosen


def _count(
    request: BenchDatasetPreparationRequest, table: _Table, chosen: list[int], source: Path
) -> _Counted:
    """The chosen rows with every count exact (``complete_counts``); what was counted is
    kept for the next run: the counts in the cached table, the tokenizer and its words
    (``store``), after one admitted conversation of each input length has verified its
    template plan (``_verify_plans``)."""
    rows = _chosen_rows(table.table, chosen, source)
    max_input = dataset_source(request).max_input_tokens
    counted = complete_counts(rows, table.tokenizers, max_input)
    completed = with_counts(table.table, counted)
    if completed is not None:
        tokencache.store_table(table.key, completed)
    if table.tokenizers.made is not None:
        _verify_plans(table.table, table.tokenizers.made, source)
    table.tokenizers.keep()
    return _Counted(counted, sum(not row.complete for row in rows))


def _write(
    request: BenchDatasetPreparationRequest,
    census: Census,
    acquired: Acquired,
    table: _Table,
    counted: _Counted,
    started: float,
) -> BenchDatasetPreparationResult:
    """The population and its evidence (the manifest) in the artifact directory, and the
    result that describes them."""
    entries = _entries(table.table, counted.chosen, dataset_source(request).output_tokens)
    timings = {"tokenize_seconds": table.seconds, "total_seconds": time.monotonic() - started}
    manifest = _manifest(request, acquired, table, counted, timings)
    written = write_outputs(request.artifact_dir, entries, manifest)
    return result(
        request,
        census,
        ClientStatus.SUCCEEDED,
        inputs=[e.input_tokens for e in entries],
        outputs=[e.output_length for e in entries],
        written=written,
    )


def _chosen_rows(table: TokenTable, chosen: list[int], source: Path) -> list[Chosen]:
    """The chosen rows, their conversations read back from the verified source."""
    spans = [(table.record_start[p], table.record_stop[p]) for p in chosen]
    found = []
    for position, record in zip(chosen, read_spans(source, spans), strict=True):
        index = table.index[position]
        conversation = parse_conversation(index, record)
        if not isinstance(conversation, Conversation):
            raise DatasetError(f"{source}: record {index} changed since it was tokenized")
        inputs, targets = table.input_tokens[position], table.target_tokens[position]
        found.append(Chosen(position, conversation, table.end[position], inputs, targets))
    return found


def _verify_plans(table: TokenTable, tok: ChatTokenizer, source: Path) -> None:
    """Render one admitted conversation of each input length through ``tok``: its first
    render of a shape checks the shape's plan against a real render, so that the kept
    plans cover every admitted entry a later selection may choose."""
    first: dict[int, int] = {}  # input length (end) -> first admitted position
    for position, start in enumerate(table.record_start):
        if start >= 0:
            first.setdefault(table.end[position], position)
    positions = [first[end] for end in sorted(first)]
    spans = [(table.record_start[p], table.record_stop[p]) for p in positions]
    for position, record in zip(positions, read_spans(source, spans), strict=True):
        conversation = parse_conversation(table.index[position], record)
        if isinstance(conversation, Conversation):
            tok.render(conversation.chat(table.end[position]))


def _entries(table: TokenTable, chosen: list[Chosen], fixed_output: int | None) -> list[Entry]:
    """The chosen rows as entries (every count exact by now)."""
    entries = []
    for c in chosen:
        length = output_length(c.target_tokens, fixed_output)
        assert isinstance(length, int)
        entries.append(
            Entry(
                c.conversation.index,
                c.conversation.source_id,
                c.conversation.chat(c.end),
                c.conversation.messages[c.end][1],
                table.total_messages[c.position],
                c.input_tokens,
                c.target_tokens,
                length,
            )
        )
    return entries


def _manifest(
    request: BenchDatasetPreparationRequest,
    acquired: Acquired,
    table: _Table,
    counted: _Counted,
    timings: dict[str, float],
) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "materialization_identity": MATERIALIZATION_IDENTITY,
        "source_path": str(acquired.path),
        "source_sha256": acquired.sha256,
        "source_origin": acquired.origin,
        "source_digest": acquired.digest_source,
        "source_format_read": table.source_format,
        "tokenizer_locator": request.model.locator,
        "tokenizer_fingerprint": table.tokenizers.fingerprint,
        "token_table_key": table.key,
        "token_table_cache_hit": table.cache_hit,
        "seed": request.seed,
        "required_entries": request.required_entries,
        "timings_seconds": timings,
        "chosen_entries_counted_now": counted.counted_now,
        "tokenizer_loaded": table.tokenizers.loaded,
        "versions": handshake_facts(),
    }


def _summary(values: list[int]) -> BenchTokenCountSummary:
    # The sum of these ints is exact in a float too, so this is numpy's mean to the bit.
    return BenchTokenCountSummary(
        minimum=min(values), maximum=max(values), mean=sum(values) / len(values)
    )


def result(
    request: BenchDatasetPreparationRequest,
    census: Census,
    status: ClientStatus,
    *,
    inputs: list[int] | None = None,
    outputs: list[int] | None = None,
    written: Written | None = None,
    error: str | None = None,
) -> BenchDatasetPreparationResult:
    """The result; ``inputs`` and ``outputs`` are per population line (request)."""
    population = None
    if written is not None and inputs and outputs:
        population = BenchPopulationInput(
            path=written.population,
            sha256=written.sha256,
            entries=len(inputs),
            tpot_applicable=all(n >= 2 for n in outputs),
        )
    return BenchDatasetPreparationResult(
        status=status,
        materialization_identity=materialization(request),
        requested_entries=request.required_entries,
        candidate_entries=census.candidates,
        admitted_entries=census.admitted,
        ineligible_entries=census.candidates - census.admitted,
        ineligible_reasons=census.reasons,
        population=population,
        input_tokens=_summary(inputs) if inputs else None,
        output_tokens=_summary(outputs) if outputs else None,
        evidence_path=written.evidence if written is not None else None,
        error=error,
    )

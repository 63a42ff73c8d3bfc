"""Preparation stage: acquire, tokenize (or reuse the token table), select, freeze."""

from __future__ import annotations

import contextlib
import gc
import time
from collections import Counter
from collections.abc import Callable, Iterator
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
from inferlab_bench.prepare import tokencache, tokenstore
from inferlab_bench.prepare.acquire import Acquired, acquire
from inferlab_bench.prepare.background import Background
from inferlab_bench.prepare.catalog import check_request_catalog, load_entry
from inferlab_bench.prepare.complete import Chosen, complete_counts, with_counts
from inferlab_bench.prepare.materialize import (
    MATERIALIZATION_IDENTITY,
    UNCOUNTED,
    Conversation,
    Reason,
    output_length,
    parse_conversation,
)
from inferlab_bench.prepare.select import select
from inferlab_bench.prepare.sharegpt import read_records, read_spans
from inferlab_bench.prepare.tokenize import ChatTokenizer, fingerprint
from inferlab_bench.prepare.tokentable import TokenTable
from inferlab_bench.prepare.write import Entry, remove_stale, write_outputs
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
class _Census:
    """Counts over the whole file, filled in as soon as they are known."""

    candidates: int = 0
    admitted: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


def run_prepare(
    request: BenchDatasetPreparationRequest,
    *,
    progress: ProgressSink = NULL_PROGRESS,
    catalog_dir: Path | None = None,
) -> BenchDatasetPreparationResult:
    """Run preparation; always returns a result (failures carry the error and counts)."""
    census = _Census()
    # SIGTERM/SIGINT at any point (download, tokenization) end in a failed result; the
    # download's temp file and the pool's workers are cleaned up on the way out.
    with interrupts.guard("preparation") as guard:
        try:
            return _run(request, census, progress, catalog_dir)
        except InferlabError as exc:
            with guard.deferred():
                return _result(request, census, ClientStatus.FAILED, error=str(exc))
        finally:
            tokenstore.stop_early()  # a helper the command line started, never taken


def _run(
    request: BenchDatasetPreparationRequest,
    census: _Census,
    progress: ProgressSink,
    catalog_dir: Path | None,
) -> BenchDatasetPreparationResult:
    source = _dataset_source(request)
    entry = load_entry(source.dataset.value, catalog_dir)
    check_request_catalog(source.catalog, entry)
    remove_stale(request.artifact_dir)
    started = time.monotonic()
    acquired = acquire(entry, request.source_path, progress)
    kwargs = _template_kwargs(request)
    tokenizer_id = fingerprint(request.model.locator)
    key = tokencache.table_key(acquired.sha256, tokenizer_id, source.max_input_tokens, kwargs)
    tokenizer = _OnDemand(request.model.locator, kwargs, tokenizer_id)
    # A cached table means a warm run, which will likely count a few chosen entries: the
    # kept tokenizer is read in a helper from now on, while this process selects.
    warm = tokencache.table_path(key).is_file()
    with tokenizer.helping(warm), _collector_paused(warm) as resume_collector:
        table, cache_hit, source_format = _token_table(
            key, acquired, request, tokenizer, progress, resume_collector
        )
        tokenized = time.monotonic()
        made = tokenizer.made
        saving = tokenstore.start_saving_backend(made, tokenizer_id) if made else _no_wait
        admitted = _census(table, source.output_tokens, census)
        chosen = select(request.seed, admitted, request.required_entries)
        if len(chosen) < request.required_entries:
            raise InsufficientEntriesError(request.required_entries, census.admitted)
        if not (cache_hit and _lack_counts(table, chosen)):
            tokenizer.stop_helping()
        rows = _chosen_rows(table, chosen, acquired.path)
        counted = complete_counts(rows, tokenizer, source.max_input_tokens)
        if tokenizer.made is not None:  # (the helper keeps what it learned itself)
            tokenstore.keep_words(tokenizer.made, tokenizer_id)
        completed = with_counts(table, counted)
        # The next preparation need not count these; written while the outputs are.
        storing = Background(lambda: _store_completed(key, completed))
        if tokenizer.made is not None:  # keep it, so the next run need not load transformers
            _verify_plans(table, tokenizer.made, acquired.path)
            saving()
            tokenstore.save(tokenizer.made, tokenizer_id)
        entries = _entries(table, counted, source.output_tokens)
        manifest = _manifest(
            request,
            acquired,
            source_format,
            tokenizer_id,
            key,
            cache_hit,
            {
                "tokenize_seconds": tokenized - started,
                "total_seconds": time.monotonic() - started,
            },
        )
        manifest["chosen_entries_counted_now"] = sum(
            a is not b for a, b in zip(rows, counted, strict=True)
        )
        manifest["tokenizer_loaded"] = tokenizer.loaded
        manifest["texts_counted_from_word_memory"] = tokenizer.from_memory
        try:
            written = write_outputs(request.artifact_dir, entries, manifest)
        finally:
            storing.result()
        return _result(request, census, ClientStatus.SUCCEEDED, entries=entries, written=written)


def _store_completed(key: str, completed: TokenTable | None) -> None:
    """Keep the table with the newly counted entries (None: it had every count)."""
    if completed is not None:
        tokencache.store_table(key, completed)


@contextlib.contextmanager
def _collector_paused(paused: bool) -> Iterator[Callable[[], None]]:
    """Python's cyclic garbage collector off for a warm run: it allocates a few hundred
    thousand objects that live to its end (table columns, the word memory), and the
    collections they set off traversed them all, 0.04-0.05 s of a 0.5 s stage. Nothing
    it makes is cyclic garbage worth waiting for; refcounting frees the rest as usual.
    Yields ``resume``: a run that turns out cold (the cached table unreadable) calls it
    before building, so that the tokenizer load and the forked workers, under a memory
    cap, collect as usual."""
    enabled = gc.isenabled()
    if paused:
        gc.disable()

    def resume() -> None:
        if paused and enabled:
            gc.enable()

    try:
        yield resume
    finally:
        resume()


def _no_wait() -> None:
    return None


def _dataset_source(request: BenchDatasetPreparationRequest) -> DatasetSource:
    if not isinstance(request.request_source, DatasetSource):
        raise RequestError(
            "request_source: preparation needs a dataset source, found kind 'random'",
            hint="random prompts are generated by AIPerf in the case stage; no preparation needed",
        )
    return request.request_source


def _template_kwargs(request: BenchDatasetPreparationRequest) -> dict[str, Any]:
    kwargs = request.request_body.get("chat_template_kwargs", {})
    if not isinstance(kwargs, dict):
        raise RequestError(
            f"request_body.chat_template_kwargs: expected an object, found {kwargs!r}"
        )
    return kwargs


class _OnDemand:
    """The tokenizer, made on first use (a warm preparation whose chosen entries are all
    counted never loads it), and the one ``tokenstore`` kept, read by a helper."""

    def __init__(self, locator: str, kwargs: dict[str, Any], fingerprint: str) -> None:
        self._args = (locator, kwargs)
        self._fingerprint = fingerprint
        self._tok: ChatTokenizer | None = None
        self._kept: tokenstore.KeptCounter | None = None

    def __call__(self) -> ChatTokenizer:
        if self._tok is None:
            self._tok = ChatTokenizer(*self._args)
        return self._tok

    @contextlib.contextmanager
    def helping(self, likely: bool) -> Iterator[None]:
        """When a warm run (a cached table) is ``likely`` to count chosen entries, read the
        kept tokenizer in a helper (``tokenstore.KeptCounter``: the command line's if it
        started one, else one started now) while the table is read, the entries chosen and
        their records read back and rendered; ``stop_helping`` ends it early when nothing
        is left to count. At the end, let it finish keeping its words, or stop it if it was
        not asked (the real tokenizer was at hand) or the run failed."""
        helper = tokenstore.take_early(*self._args)  # started by the command line
        facts = tokenstore.kept_facts(self._fingerprint, self._args[1]) if likely else None
        if helper is None and facts is not None:
            helper = tokenstore.KeptCounter.start(*self._args)
        if helper is not None and facts is not None:
            helper.bind(self._fingerprint, *facts)
            self._kept = helper
        elif helper is not None:
            helper.close(wait=False)  # a cold run, or nothing kept: started in vain
        try:
            yield
        except BaseException:
            self.stop_helping()
            raise
        if self._kept is not None:
            self._kept.close(wait=True)

    def stop_helping(self) -> None:
        """No count will be asked of the helper: stop it now (it would only take a core)."""
        if self._kept is not None:
            self._kept.close(wait=False)
            self._kept = None

    def kept(self) -> tokenstore.KeptCounter | None:
        """The helper counting with the kept tokenizer (None once the real one is at
        hand: it counts the same)."""
        return None if self._tok is not None else self._kept

    @property
    def made(self) -> ChatTokenizer | None:
        """The real tokenizer, if this run loaded it."""
        return self._tok

    @property
    def from_memory(self) -> int:
        """Texts the kept counter counted from the kept word memory (``tokenstore``)."""
        return 0 if self._kept is None else self._kept.from_memory

    @property
    def loaded(self) -> str:
        """For the manifest: "transformers" (the real tokenizer), "kept" (``tokenstore``'s,
        without transformers) or "none"."""
        if self._tok is not None:
            return "transformers"
        return "kept" if self._kept is not None and self._kept.counted else "none"


def _token_table(
    key: str,
    acquired: Acquired,
    request: BenchDatasetPreparationRequest,
    tokenizer: _OnDemand,
    progress: ProgressSink,
    resume_collector: Callable[[], None],
) -> tuple[TokenTable, bool, str]:
    cached = tokencache.load_table(key)
    if cached is not None:
        return cached, True, "cached-token-table"
    resume_collector()
    from inferlab_bench.prepare.table import build_table  # numpy and pyarrow: a cold run only

    tok = tokenizer()
    progress.begin("reading dataset", None, unit="")
    source = read_records(acquired.path)
    progress.end()
    max_input = _dataset_source(request).max_input_tokens
    table = build_table(source.records, tok, max_input, progress)
    tokencache.store_table(key, table)
    return table, False, source.source_format


def _census(table: TokenTable, fixed_output: int | None, census: _Census) -> list[tuple[int, str]]:
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


def _lack_counts(table: TokenTable, chosen: list[int]) -> bool:
    """Whether some chosen row still lacks a count (``complete_counts`` will count it)."""
    inputs, targets = table.input_tokens, table.target_tokens
    return any(UNCOUNTED in (inputs[p], targets[p]) for p in chosen)


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
    source_format: str,
    tokenizer_id: str,
    key: str,
    cache_hit: bool,
    timings: dict[str, float],
) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "materialization_identity": MATERIALIZATION_IDENTITY,
        "source_path": str(acquired.path),
        "source_sha256": acquired.sha256,
        "source_origin": acquired.origin,
        "source_digest": acquired.digest_source,
        "source_format_read": source_format,
        "tokenizer_locator": request.model.locator,
        "tokenizer_fingerprint": tokenizer_id,
        "token_table_key": key,
        "token_table_cache_hit": cache_hit,
        "seed": request.seed,
        "required_entries": request.required_entries,
        "timings_seconds": timings,
        "versions": handshake_facts(),
    }


def _summary(values: list[int]) -> BenchTokenCountSummary:
    # The sum of these ints is exact in a float too, so this is numpy's mean to the bit.
    return BenchTokenCountSummary(
        minimum=min(values), maximum=max(values), mean=sum(values) / len(values)
    )


def _result(
    request: BenchDatasetPreparationRequest,
    census: _Census,
    status: ClientStatus,
    *,
    entries: list[Entry] | None = None,
    written: Any = None,
    error: str | None = None,
) -> BenchDatasetPreparationResult:
    population = None
    if written is not None and entries:
        population = BenchPopulationInput(
            path=written.population,
            sha256=written.sha256,
            entries=len(entries),
            tpot_applicable=all(e.output_length >= 2 for e in entries),
        )
    return BenchDatasetPreparationResult(
        status=status,
        materialization_identity=MATERIALIZATION_IDENTITY,
        requested_entries=request.required_entries,
        candidate_entries=census.candidates,
        admitted_entries=census.admitted,
        ineligible_entries=census.candidates - census.admitted,
        ineligible_reasons=census.reasons,
        population=population,
        input_tokens=_summary([e.input_tokens for e in entries]) if entries else None,
        output_tokens=_summary([e.output_length for e in entries]) if entries else None,
        evidence_path=written.evidence if written is not None else None,
        error=error,
    )

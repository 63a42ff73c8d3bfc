"""Preparation of a conversation population (``sharegpt-multi-turn-v1``): scan, select, count,
write. ``stage.run_prepare`` acquires the source and hands over here.

``required_entries`` counts sessions. The population has one line per turn, the turns of a
session consecutive and in order, sharing the session id of the session's position in the
sample; each line is the AIPerf ``mooncake_trace`` request of a single-request population
(the whole history in ``messages``, no ``delay``: think time belongs to the case). The
evidence has one line per turn with its counts and reusable prefix (``sessionscan``).
The scan's rows are cached (``sessionscan.store_scan``): another seed or size reads them
and only tokenizes the chosen sessions.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import orjson

from inferlab_bench.errors import DatasetError, InsufficientEntriesError
from inferlab_bench.layout import session_id
from inferlab_bench.prepare.acquire import Acquired
from inferlab_bench.prepare.materialize import Conversation, output_length, parse_conversation
from inferlab_bench.prepare.select import select
from inferlab_bench.prepare.sessions import MATERIALIZATION_IDENTITY, SCHEMA_VERSION
from inferlab_bench.prepare.sessionscan import (
    ScanRow,
    Turn,
    count_turns,
    load_scan,
    scan,
    scan_key,
    store_scan,
)
from inferlab_bench.prepare.sharegpt import read_records, read_spans
from inferlab_bench.prepare.stage import Census, dataset_source, result, template_kwargs
from inferlab_bench.prepare.tokens import ChatTokenizer, fingerprint
from inferlab_bench.prepare.write import request_line, write_files
from inferlab_bench.progress import ProgressSink
from inferlab_bench.protocol import (
    BenchDatasetPreparationRequest,
    BenchDatasetPreparationResult,
    ClientStatus,
)
from inferlab_bench.versions import handshake_facts


def prepare_sessions(
    request: BenchDatasetPreparationRequest,
    census: Census,
    acquired: Acquired,
    progress: ProgressSink,
    started: float,
) -> BenchDatasetPreparationResult:
    scan_started = time.monotonic()
    source = dataset_source(request)
    max_input, fixed_output = source.max_input_tokens, source.output_tokens
    kwargs = template_kwargs(request)
    tok = ChatTokenizer(request.model.locator, kwargs)  # loads on a thread
    tokenizer_id = fingerprint(request.model.locator)
    key = scan_key(acquired.sha256, tokenizer_id, max_input, fixed_output, kwargs)
    cached = load_scan(key)
    if cached is None:
        progress.begin("reading dataset", None, unit="")
        records = read_records(acquired.path)
        progress.end()
        rows = scan(records.records, tok, max_input, fixed_output, progress)
        source_format: str = records.source_format
        store_scan(key, rows, source_format)
    else:
        rows, source_format = cached
    scanned = time.monotonic()
    admitted = _census(rows, census)
    chosen = select(
        request.seed, [(r.index, r.source_id) for r in admitted], request.required_entries
    )
    if len(chosen) < request.required_entries:
        raise InsufficientEntriesError(request.required_entries, census.admitted)
    by_index = {r.index: r for r in admitted}
    sessions = _read_back([by_index[i] for i in chosen], acquired)
    turns = count_turns(tok, sessions, max_input, fixed_output)
    lengths = [_output_length(t, fixed_output) for t in turns]
    timings = {
        "tokenize_seconds": scanned - scan_started,
        "total_seconds": time.monotonic() - started,
    }
    manifest = _manifest(request, acquired, source_format, len(sessions), timings)
    manifest |= {"tokenizer_fingerprint": tokenizer_id, "session_scan_key": key}
    manifest["session_scan_cache_hit"] = cached is not None
    pairs = list(zip(turns, lengths, strict=True))
    written = write_files(
        request.artifact_dir,
        b"".join(request_line(t.session, t.messages, n) for t, n in pairs),
        b"".join(_evidence_line(p, t, n) for p, (t, n) in enumerate(pairs)),
        {**manifest, "turns": len(turns)},
    )
    return result(
        request,
        census,
        ClientStatus.SUCCEEDED,
        inputs=[t.input_tokens for t in turns],
        outputs=lengths,
        written=written,
    )


def _census(rows: list[ScanRow], census: Census) -> list[ScanRow]:
    """Count outcomes over the whole file (a conversation is a candidate, a session is an
    admitted entry); return the admitted rows."""
    counts = Counter(r.reason for r in rows)
    census.candidates = len(rows)
    census.admitted = counts.pop(None, 0)
    census.reasons = {r: n for r, n in sorted(counts.items()) if r is not None and n}
    return [r for r in rows if r.reason is None]


def _read_back(rows: list[ScanRow], acquired: Acquired) -> list[tuple[Conversation, int]]:
    """The chosen conversations, read back from the verified source, with their turns."""
    spans = [(r.record_start, r.record_stop) for r in rows]
    found = []
    for row, record in zip(rows, read_spans(acquired.path, spans), strict=True):
        conversation = parse_conversation(row.index, record)
        if not isinstance(conversation, Conversation):
            raise DatasetError(f"{acquired.path}: record {row.index} changed since it was read")
        found.append((conversation, row.turns))
    return found


def _output_length(turn: Turn, fixed_output: int | None) -> int:
    length = output_length(turn.target_tokens, fixed_output)
    assert isinstance(length, int)  # sessionscan checked every target
    return length


def _evidence_line(position: int, turn: Turn, length: int) -> bytes:
    record = {
        "position": position,
        "session_id": session_id(turn.session),
        "turn": turn.turn,
        "index": turn.conversation.index,
        "source_id": turn.conversation.source_id,
        "input_tokens": turn.input_tokens,
        "reusable_prefix_tokens": turn.reusable_prefix_tokens,
        "target_tokens": turn.target_tokens,
        "output_tokens": length,
        "target_sha256": turn.target_sha256,
    }
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS) + b"\n"


def _manifest(
    request: BenchDatasetPreparationRequest,
    acquired: Acquired,
    source_format: str,
    sessions: int,
    timings: dict[str, float],
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "materialization_identity": MATERIALIZATION_IDENTITY,
        "source_path": str(acquired.path),
        "source_sha256": acquired.sha256,
        "source_origin": acquired.origin,
        "source_digest": acquired.digest_source,
        "source_format_read": source_format,
        "tokenizer_locator": request.model.locator,
        "seed": request.seed,
        "required_entries": request.required_entries,
        "sessions": sessions,
        "timings_seconds": timings,
        "versions": handshake_facts(),
    }

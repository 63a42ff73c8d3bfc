"""The ground-truth log: what the server really did, in memory and as flushed JSONL lines."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import orjson

from inferlab_bench.atomic import open_for_append

MEMORY_RECORDS = 200_000
"""Records kept in memory for ``records()`` and the truth path (about 1 KB each): a server left
running for days keeps the latest ones; the file, when given, keeps them all."""


class GroundTruthLog:
    """Appends one JSON object per record; each line is flushed whole before the next."""

    def __init__(self, path: Path | None, memory: int = MEMORY_RECORDS) -> None:
        self.path = path
        self._records: deque[dict[str, Any]] = deque(maxlen=memory)
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._observers: list[Callable[[dict[str, Any]], None]] = []
        if path is not None:
            self._file = open_for_append(path)

    def subscribe(self, observer: Callable[[dict[str, Any]], None]) -> None:
        """Hand every later record to ``observer`` too (the /metrics counters)."""
        self._observers.append(observer)

    def append(self, record: dict[str, Any]) -> None:
        """Keep the record, show it to the observers and write it as one complete line."""
        line = orjson.dumps(record) + b"\n"
        with self._lock:
            self._records.append(record)
            for observer in self._observers:
                observer(record)
            if self._file is not None:
                self._file.write(line)
                self._file.flush()

    def records(self) -> list[dict[str, Any]]:
        """A copy of the latest ``memory`` records (every one, below that), in order."""
        with self._lock:
            return list(self._records)

    def close(self) -> None:
        """Close the file (records stay readable in memory)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> GroundTruthLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@dataclass
class RequestTrace:
    """The ground truth of one generation request, filled in as it is served."""

    request_id: str
    request_index: int
    path: str
    stream: bool
    arrival_ns: int
    arrival_stamped_at: str = "handler"
    prompt_tokens: int = 0
    max_tokens: int | None = None
    min_tokens: int | None = None
    ignore_eos: bool = False
    choices: int = 1  # n times the prompts of a batch; completion_tokens counts them all
    status: int = 200
    fault: str | None = None
    x_request_id: str | None = None
    x_correlation_id: str | None = None
    prompt_sha256: str | None = None
    first_user_sha256: str | None = None
    last_user_sha256: str | None = None
    handler_ns: int | None = None
    admitted_ns: int | None = None
    first_token_before_ns: int | None = None
    first_token_ns: int | None = None
    last_token_before_ns: int | None = None
    last_token_ns: int | None = None
    end_ns: int | None = None
    first_token_due_ns: int | None = None
    first_token_lag_ns: int | None = None
    max_token_lag_ns: int | None = None
    max_write_ns: int | None = None
    completion_tokens: int = 0
    cached_tokens: int = 0
    reported_prompt_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None

    def token_sent(self, before_ns: int, after_ns: int, due_ns: int, count: int = 1) -> None:
        """Note ``count`` tokens written between ``before_ns`` and ``after_ns``, due at ``due_ns``.

        The lag is how late the write started against the model's schedule: the
        scheduler's own error, apart from the write itself (``after - before``).
        """
        lag = before_ns - due_ns
        if self.first_token_ns is None:
            self.first_token_before_ns, self.first_token_ns = before_ns, after_ns
            self.first_token_due_ns, self.first_token_lag_ns = due_ns, lag
        self.last_token_before_ns, self.last_token_ns = before_ns, after_ns
        worst = self.max_token_lag_ns
        self.max_token_lag_ns = lag if worst is None else max(lag, worst)
        self.max_write_ns = max(after_ns - before_ns, self.max_write_ns or 0)
        self.completion_tokens += count

    def record(self) -> dict[str, Any]:
        """The JSONL record (``kind`` = request)."""
        out: dict[str, Any] = {"kind": "request", **vars(self)}
        out["headers_request_id"] = self.x_request_id or self.x_correlation_id
        if out["end_ns"] is None:
            out["end_ns"] = time.time_ns()
        # The figures (here and in /metrics) run from arrival (first byte parsed) to the
        # start of the write: no client can see a token before it, so a client's TTFT
        # minus this one is its own overhead, never negative. end_ns, too, is taken
        # before the last write.
        out["measured_from"] = "arrival_ns"
        out["measured_to"] = "first_token_before_ns"
        first = self.first_token_before_ns
        out["ttft_ns"] = None if first is None else first - self.arrival_ns
        out["e2e_ns"] = out["end_ns"] - self.arrival_ns
        return out


def reset_record(path: str, status: int, cleared_blocks: int, fault: str | None) -> dict[str, Any]:
    """The JSONL record of one prefix-cache reset call (``kind`` = reset)."""
    return {
        "kind": "reset",
        "path": path,
        "time_ns": time.time_ns(),
        "status": status,
        "cleared_blocks": cleared_blocks,
        "fault": fault,
    }

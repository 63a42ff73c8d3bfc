"""The plain typed inputs of every validity check: one phase's per-request columns."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

Int64Array = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


TURN_KEY = re.compile(r"(.+)#t(\d+)")
"""A conversation case keys each record by its turn, ``session#tN`` (``case.sessions``)."""


def turn_key(session_id: str, turn: int) -> str:
    """One turn's key: ``inferlab-00000003#t1``."""
    return f"{session_id}#t{turn}"


def session_spans(
    keys: Sequence[str], start_ns: Int64Array, end_ns: Int64Array
) -> tuple[Int64Array, Int64Array] | None:
    """Each session's first start and last end, when every key is a turn key (a
    conversation case: a session holds its concurrency slot from its first turn to its
    last, think time included); None for single requests."""
    sessions: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        match = TURN_KEY.fullmatch(key)
        if match is None:
            return None
        sessions.setdefault(match.group(1), []).append(i)
    if not sessions:
        return None
    starts = np.array([start_ns[rows].min() for rows in sessions.values()], dtype=np.int64)
    ends = np.array([end_ns[rows].max() for rows in sessions.values()], dtype=np.int64)
    return starts, ends


@dataclass(frozen=True)
class PhaseRecords:
    """Per-request columns of one benchmark phase, all the same length, in any order.

    Timestamps are wall-clock integer nanoseconds as AIPerf writes them. Token columns
    are float so that a value the server did not report is NaN, never a silent zero.
    ``credit_issued_ns`` is None when AIPerf did not record credit issue times.
    ``good`` is None when no SLO was set (AIPerf then writes no good_request_count).
    """

    session_ids: tuple[str, ...]
    start_ns: Int64Array
    end_ns: Int64Array
    succeeded: BoolArray
    prompt_tokens: FloatArray
    output_tokens: FloatArray
    cached_prompt_tokens: FloatArray
    credit_issued_ns: Int64Array | None = None
    good: BoolArray | None = None
    client_send_ms: FloatArray | None = None
    """Per request, ms the client spent after request start before the request was sent
    (waiting for a connection, connecting, writing); None when AIPerf did not trace it."""
    connect_ms: FloatArray | None = None
    """Per request, ms of its TCP connect (part of ``client_send_ms``; 0 on a reused
    connection); None when AIPerf did not trace it."""
    ttft_ms: FloatArray | None = None
    itl_ms: FloatArray | None = None
    """Per request, the mean inter-token latency (AIPerf's, ms); NaN where not measured."""
    ttst_ms: FloatArray | None = None
    """Per request, first token -> second token at the client (AIPerf's time_to_second_token,
    ms); NaN where not measured."""
    first_burst_ms: FloatArray | None = None
    """Per request, how late at least its first token was read, from the burst that opens
    its stream (``read_bursts``); NaN where not measured. None: no chunk gaps were kept."""
    largest_burst_ms: FloatArray | None = None
    """Per request, the largest burst anywhere in its stream (``read_bursts``)."""
    latency_ms: FloatArray | None = None
    """Per request, the end-to-end latency (AIPerf's request_latency, ms)."""
    error_class: tuple[str | None, ...] | None = None
    """Per request, the class of its failure (``failures.ErrorClass`` values; None where it
    succeeded); None when the records carry no error details."""
    error_message: tuple[str | None, ...] | None = None
    worker_ids: tuple[str, ...] | None = None
    """Per request, the AIPerf worker that sent it; None when the records do not say."""
    request_ids: tuple[str | None, ...] | None = None
    """Per request, the X-Request-ID it was sent with (joins it to a server's ground truth)."""

    def __post_init__(self) -> None:
        n = len(self.session_ids)
        for name in (
            "start_ns",
            "end_ns",
            "succeeded",
            "prompt_tokens",
            "output_tokens",
            "cached_prompt_tokens",
            "credit_issued_ns",
            "good",
            "client_send_ms",
            "connect_ms",
            "ttft_ms",
            "itl_ms",
            "ttst_ms",
            "first_burst_ms",
            "largest_burst_ms",
            "latency_ms",
            "error_class",
            "error_message",
            "worker_ids",
            "request_ids",
        ):
            column = getattr(self, name)
            if column is not None and len(column) != n:
                raise ValueError(f"PhaseRecords.{name}: {len(column)} values for {n} records")

    def __len__(self) -> int:
        return len(self.session_ids)

    def send_order(self) -> npt.NDArray[np.intp]:
        """Indices in the order requests were sent: by credit issue, then start, then id."""
        keys: list[object] = [np.asarray(self.session_ids, dtype=object), self.start_ns]
        if self.credit_issued_ns is not None:
            keys.append(self.credit_issued_ns)
        return np.lexsort(keys)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Expectations:
    """What was planned: input tokens (as rendered) per session, outputs per session or fixed.

    A random source has no population: its input is unknown (empty mapping) and every
    request asks for the same ``output_tokens`` count.
    """

    input_tokens: Mapping[str, int] = field(default_factory=dict)
    output_tokens: Mapping[str, int] | int = field(default_factory=dict)


def lookup(mapping: Mapping[str, int], session_ids: tuple[str, ...]) -> FloatArray:
    """The planned value of each session (NaN where the population has none)."""
    return np.fromiter(
        (float(mapping.get(sid, np.nan)) for sid in session_ids),
        dtype=np.float64,
        count=len(session_ids),
    )

"""Where each record of a JSON array (or JSONL file) lies in the file's bytes (pure, numpy).

Parsing the whole 642 MB ShareGPT array at once holds every conversation as Python objects
next to the file's bytes: about three times the file. Instead the bytes are kept once and
scanned for the array's top-level commas; each record is parsed only when it is read, by
whichever worker reads it. The scan is vectorized over fixed-size windows, carrying three
facts across window edges: inside a string or not, the bracket depth, and how many
backslashes ended the previous window (an escaped quote does not end a string).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

_WINDOW = 16 << 20
_QUOTE, _BACKSLASH, _COMMA, _NEWLINE = 34, 92, 44, 10
_OPENERS, _CLOSERS = (91, 123), (93, 125)  # [ {   ] }
_DEPTH_DELTA = np.zeros(256, dtype=np.int64)  # per byte value: +1 opens, -1 closes
_DEPTH_DELTA[list(_OPENERS)] = 1
_DEPTH_DELTA[list(_CLOSERS)] = -1
_WHITESPACE = b" \t\r\n"

IntArray = npt.NDArray[np.int64]


class SpanError(ValueError):
    """The bytes are not a JSON array: what is wrong, for the caller to report with the path."""


@dataclass(frozen=True)
class Spans:
    """Byte ranges ``[starts[i], ends[i])`` of the records, in file order."""

    starts: IntArray
    ends: IntArray
    lines: IntArray | None = None
    """1-based line number of each record (JSONL only)."""

    def __len__(self) -> int:
        return int(self.starts.shape[0])


@dataclass
class _State:
    in_string: bool = False
    depth: int = 0
    backslashes: int = 0
    opened_at: int = -1
    closed_at: int = -1


def array_spans(data: bytes) -> Spans:
    """The elements of the top-level JSON array in ``data`` (each still to be parsed)."""
    head = data.lstrip(_WHITESPACE)[:1]
    if head != b"[":
        found = head.decode("latin-1") if head else "nothing"
        raise SpanError(f"expected a JSON array of conversations, found {found!r} first")
    view = np.frombuffer(data, dtype=np.uint8)
    state = _State()
    cuts: list[IntArray] = []
    for offset in range(0, len(view), _WINDOW):
        cuts.append(_scan(view[offset : offset + _WINDOW], offset, state))
    if state.in_string or state.depth != 0 or state.closed_at < 0:
        raise SpanError("the JSON array is not closed (the file is truncated)")
    if data[state.closed_at + 1 :].strip(_WHITESPACE):
        raise SpanError(f"unexpected bytes after the JSON array (offset {state.closed_at + 1})")
    commas = np.concatenate(cuts) if cuts else np.zeros(0, dtype=np.int64)
    starts = np.concatenate(([state.opened_at + 1], commas + 1)).astype(np.int64)
    ends = np.concatenate((commas, [state.closed_at])).astype(np.int64)
    if len(starts) == 1 and not data[starts[0] : ends[0]].strip(_WHITESPACE):
        return Spans(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    return Spans(starts, ends)


def line_spans(data: bytes) -> Spans:
    """The non-blank lines of a JSONL file (a raw newline never occurs inside a record)."""
    view = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(view == _NEWLINE).astype(np.int64)
    starts = np.concatenate(([0], newlines + 1)).astype(np.int64)
    ends = np.concatenate((newlines, [len(view)])).astype(np.int64)
    lines = np.arange(1, len(starts) + 1, dtype=np.int64)
    keep = np.fromiter(
        (bool(data[s:e].strip(_WHITESPACE)) for s, e in zip(starts, ends, strict=True)),
        dtype=bool,
        count=len(starts),
    )
    return Spans(starts[keep], ends[keep], lines[keep])


def _scan(window: npt.NDArray[np.uint8], offset: int, state: _State) -> IntArray:
    """Top-level commas of one window (absolute offsets); updates ``state``."""
    quotes = _unescaped_quotes(window, state)
    structural = np.flatnonzero(_structural(window))
    # A byte is outside strings when an even number of quotes precede it (counting the
    # string left open by the previous window).
    before = np.searchsorted(quotes, structural) + int(state.in_string)
    outside = structural[before % 2 == 0]
    values = window[outside]
    delta = _DEPTH_DELTA[values]
    depth_after = state.depth + np.cumsum(delta)
    if depth_after.size and int(depth_after.min()) < 0:
        where = offset + int(outside[np.argmin(depth_after)])
        raise SpanError(f"unbalanced brackets near offset {where}")
    _note_array_edges(outside, delta, depth_after, offset, state)
    top_commas = outside[(delta == 0) & (depth_after == 1)] + offset
    if depth_after.size:
        state.depth = int(depth_after[-1])
    state.in_string = bool((len(quotes) + int(state.in_string)) % 2)
    state.backslashes = _trailing_backslashes(window, state.backslashes)
    result: IntArray = top_commas.astype(np.int64)
    return result


def _structural(window: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    """Commas and brackets. In-place equality tests: 2.5x a 256-entry lookup table, and
    np.isin (which sorts) was 60x slower than the table."""
    mask: npt.NDArray[np.bool_] = np.equal(window, _COMMA)
    for byte in (*_OPENERS, *_CLOSERS):
        mask |= window == byte
    return mask


def _note_array_edges(
    positions: IntArray, delta: IntArray, depth_after: IntArray, offset: int, state: _State
) -> None:
    opened = np.flatnonzero((delta == 1) & (depth_after == 1))
    closed = np.flatnonzero((delta == -1) & (depth_after == 0))
    if opened.size:
        if state.opened_at >= 0 or opened.size > 1:
            raise SpanError("more than one top-level JSON value")
        state.opened_at = int(positions[opened[0]]) + offset
    if closed.size:
        state.closed_at = int(positions[closed[-1]]) + offset


def _unescaped_quotes(window: npt.NDArray[np.uint8], state: _State) -> IntArray:
    """Quote positions not preceded by an odd run of backslashes (runs may span windows)."""
    quotes = np.flatnonzero(window == _QUOTE)
    slashes = np.flatnonzero(window == _BACKSLASH)
    run = np.zeros(len(quotes), dtype=np.int64)
    if slashes.size:
        # Runs of consecutive backslashes: their last positions and lengths.
        breaks = np.flatnonzero(np.diff(slashes) != 1)
        run_ends = slashes[np.concatenate((breaks, [len(slashes) - 1]))]
        run_starts = slashes[np.concatenate(([0], breaks + 1))]
        lengths = run_ends - run_starts + 1
        if run_starts[0] == 0:
            lengths[0] += state.backslashes  # the run began in the previous window
        where = np.minimum(np.searchsorted(run_ends, quotes - 1), len(run_ends) - 1)
        hit = run_ends[where] == quotes - 1
        run[hit] = lengths[where[hit]]
    if state.backslashes and quotes.size and quotes[0] == 0:
        run[0] = state.backslashes  # the whole run is in the previous window
    unescaped: IntArray = quotes[run % 2 == 0]
    return unescaped


def _trailing_backslashes(window: npt.NDArray[np.uint8], carried: int) -> int:
    """Backslashes at the end of ``window`` (plus ``carried`` if it is nothing but them)."""
    others = np.flatnonzero(window[-4096:] != _BACKSLASH)
    if others.size:
        return min(len(window), 4096) - 1 - int(others[-1])
    others = np.flatnonzero(window != _BACKSLASH)  # a run of 4 KiB or more: rare
    if not others.size:
        return carried + len(window)
    return len(window) - 1 - int(others[-1])

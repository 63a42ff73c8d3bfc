"""Failed requests: every failure counted by error class; any failure fails the verdict.

A benchmark whose requests failed measured something other than the load asked for: the
failed requests are missing from every latency figure and the throughput is lower than the
server's. So a single failed or cancelled profiling request makes ``requests_succeeded``
fail, with the error classes and counts that say where to look:

- ``transport``: the connection failed before a complete answer (refused, reset, closed by
  the server, e.g. a pooled connection the server had already closed).
- ``http_status``: the server answered with a non-2xx status.
- ``malformed_stream``: a 2xx answer whose stream could not be read or carried an error event.
- ``cancelled``: the client gave up on the request (AIPerf's timeout or cancellation).
- ``other``: anything else (the message says what).
"""

from __future__ import annotations

import enum
from collections import Counter

import numpy as np

from inferlab_bench.validity.inputs import PhaseRecords
from inferlab_bench.validity.verdict import Check, Figures, Verdict, at_most

NAME = "requests_succeeded"
EXAMPLE_CHARS = 200


class ErrorClass(enum.StrEnum):
    """Where a request failed."""

    TRANSPORT = "transport"
    HTTP_STATUS = "http_status"
    MALFORMED_STREAM = "malformed_stream"
    CANCELLED = "cancelled"
    OTHER = "other"


# Exception type names as AIPerf records them (ErrorDetails.from_exception: the class name).
_TRANSPORT_TYPES = frozenset(
    {
        "ServerDisconnectedError",
        "ClientConnectorError",
        "ClientConnectionError",
        "ClientConnectionResetError",
        "ClientOSError",
        "ClientPayloadError",
        "ServerTimeoutError",
        "SocketTimeoutError",
        "ConnectionError",
        "ConnectionResetError",
        "ConnectionRefusedError",
        "ConnectionAbortedError",
        "BrokenPipeError",
        "OSError",
        "TimeoutError",
        "RequestSendTimeout",
        "ClientConnectorDNSError",
    }
)
_STREAM_TYPES = frozenset(
    {
        "SSEResponseError",
        "JSONDecodeError",
        "ValueError",
        "UnicodeDecodeError",
        "ContentTypeError",
        "InvalidInferenceResultError",
        "ResponseParseError",
    }
)
_CANCELLED_TYPES = frozenset({"RequestCancellationError", "CancelledError"})


def classify(code: int | None, error_type: str | None, message: str | None) -> ErrorClass:
    """The class of one AIPerf error record (``error.code``, ``error.type``, ``error.message``)."""
    kind = error_type or ""
    if kind in _CANCELLED_TYPES or code == 499:
        return ErrorClass.CANCELLED
    if kind in _STREAM_TYPES:
        return ErrorClass.MALFORMED_STREAM
    if kind in _TRANSPORT_TYPES or "Disconnected" in kind or "Connection" in kind:
        return ErrorClass.TRANSPORT
    if code is not None and 100 <= code <= 599:
        # AIPerf records a non-2xx answer as code = status, type = the reason phrase.
        return ErrorClass.HTTP_STATUS
    text = (message or "").lower()
    if "disconnect" in text or "connection" in text:
        return ErrorClass.TRANSPORT
    return ErrorClass.OTHER


class FailureClass(Figures):
    """How many requests failed in one class, and the first message of that class."""

    error_class: ErrorClass
    count: int
    example: str


class FailedRequests(Figures):
    """The verdict ``requests_succeeded`` and its figures."""

    verdict: Verdict
    requests: int
    failed: int
    classes: tuple[FailureClass, ...]
    check: Check

    def in_words(self) -> str:
        """``6 of 24 requests failed: transport 6`` or ``all 24 requests succeeded``."""
        if not self.failed:
            return f"all {self.requests} requests succeeded"
        counts = ", ".join(f"{c.error_class.value} {c.count}" for c in self.classes)
        return f"{self.failed} of {self.requests} requests failed: {counts}"


def assess_failures(records: PhaseRecords) -> FailedRequests:
    """Count the failed requests of a phase by class; the verdict fails on any failure."""
    failed_at = np.flatnonzero(~records.succeeded)
    counts: Counter[ErrorClass] = Counter()
    examples: dict[ErrorClass, str] = {}
    for index in failed_at:
        error_class, message = _failure(records, int(index))
        counts[error_class] += 1
        examples.setdefault(error_class, message[:EXAMPLE_CHARS])
    classes = tuple(
        FailureClass(error_class=c, count=counts[c], example=examples[c])
        for c in ErrorClass
        if counts[c]
    )
    total = len(records)
    check = at_most(
        NAME,
        float(len(failed_at)) if total else None,
        0.0,
        "failed or cancelled profiling requests (any failure means the load was not the "
        "one asked for, and the latencies leave those requests out)",
    )
    return FailedRequests(
        verdict=check.verdict if total else Verdict.UNKNOWN,
        requests=total,
        failed=len(failed_at),
        classes=classes,
        check=check,
    )


def _failure(records: PhaseRecords, index: int) -> tuple[ErrorClass, str]:
    classes, messages = records.error_class, records.error_message
    message = (messages[index] if messages is not None else None) or ""
    found = classes[index] if classes is not None else None
    if found is not None:
        return ErrorClass(found), message
    return ErrorClass.OTHER, message or "failed (no error recorded)"

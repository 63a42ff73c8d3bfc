"""Failed requests: counted by class, and any failure fails the case's validity."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab_bench.protocol import ConcurrencyLimited
from inferlab_bench.validity import CaseFacts, Expectations, Verdict, assess, summary_lines
from inferlab_bench.validity.failures import ErrorClass, assess_failures, classify
from inferlab_bench.validity.inputs import PhaseRecords
from tests.validity.builders import closed_loop, ids

LOAD = ConcurrencyLimited(kind="concurrency_limited", concurrency=2)
DISCONNECTED = "ServerDisconnectedError('Server disconnected')"


@pytest.mark.parametrize(
    ("code", "kind", "message", "expected"),
    [
        (None, "ServerDisconnectedError", DISCONNECTED, ErrorClass.TRANSPORT),
        (None, "ClientConnectorError", "Cannot connect to host", ErrorClass.TRANSPORT),
        (None, "ClientOSError", "[Errno 104] Connection reset by peer", ErrorClass.TRANSPORT),
        (0, "RequestSendTimeout", "Timed out waiting for request to be sent", ErrorClass.TRANSPORT),
        (500, "Internal Server Error", '{"error": "boom"}', ErrorClass.HTTP_STATUS),
        (429, "Too Many Requests", "slow down", ErrorClass.HTTP_STATUS),
        (500, "SSEResponseError", "error event in stream", ErrorClass.MALFORMED_STREAM),
        (None, "JSONDecodeError", "Expecting value", ErrorClass.MALFORMED_STREAM),
        (499, "RequestCancellationError", "Request cancelled", ErrorClass.CANCELLED),
        (None, "Surprise", "something else", ErrorClass.OTHER),
    ],
)
def test_each_aiperf_error_falls_in_its_class(
    code: int | None, kind: str, message: str, expected: ErrorClass
) -> None:
    assert classify(code, kind, message) is expected


def with_failures(base: PhaseRecords, failed: dict[int, tuple[str, str]]) -> PhaseRecords:
    """``base`` with requests ``index -> (class, message)`` failed, as the adapter builds them."""
    n = len(base)
    succeeded = np.ones(n, dtype=bool)
    classes: list[str | None] = [None] * n
    messages: list[str | None] = [None] * n
    for index, (error_class, message) in failed.items():
        succeeded[index] = False
        classes[index], messages[index] = error_class, message
    fields = {name: getattr(base, name) for name in base.__dataclass_fields__}
    fields |= {
        "succeeded": succeeded,
        "error_class": tuple(classes),
        "error_message": tuple(messages),
    }
    return PhaseRecords(**fields)


def facts() -> CaseFacts:
    expected = Expectations(
        input_tokens={s: 100 for s in ids(24)}, output_tokens={s: 10 for s in ids(24)}
    )
    return CaseFacts(load=LOAD, expectations=expected)


def test_a_run_with_failed_requests_is_never_valid() -> None:
    """What a simulator or a server closing pooled connections gives: 6 of 24 failed."""
    healthy = closed_loop(2, 24, latency_ms=100, gap_ms=1)
    failed = {i: ("transport", DISCONNECTED) for i in (1, 5, 9, 13)}
    failed |= {3: ("http_status", "HTTP 503"), 7: ("malformed_stream", "bad chunk")}
    doc = assess(with_failures(healthy, failed), None, facts())
    assert doc.verdict is Verdict.FAIL
    assert doc.verdicts["requests_succeeded"] is Verdict.FAIL
    assert doc.failed() == ["requests_succeeded"]
    assert doc.failures is not None
    assert doc.failures.failed == 6
    assert {c.error_class: c.count for c in doc.failures.classes} == {
        ErrorClass.TRANSPORT: 4,
        ErrorClass.HTTP_STATUS: 1,
        ErrorClass.MALFORMED_STREAM: 1,
    }
    lines = summary_lines(doc)
    assert lines[0] == (
        "validity: fail (6 of 24 requests failed: transport 4, http_status 1, malformed_stream 1)"
    )
    assert "Server disconnected" in "\n".join(lines)
    [check] = doc.failed_checks()
    assert check.name == "requests_succeeded" and check.observed == 6


def test_no_failures_pass() -> None:
    doc = assess(closed_loop(2, 24, latency_ms=100, gap_ms=1), None, facts())
    assert doc.verdicts["requests_succeeded"] is Verdict.PASS
    assert doc.verdict is Verdict.PASS
    assert summary_lines(doc)[0] == "validity: pass"


def test_a_failure_without_error_details_still_counts() -> None:
    base = closed_loop(2, 4, latency_ms=100, gap_ms=1)
    fields = {name: getattr(base, name) for name in base.__dataclass_fields__}
    fields["succeeded"] = np.array([True, False, True, True])
    result = assess_failures(PhaseRecords(**fields))
    assert result.verdict is Verdict.FAIL
    assert [(c.error_class, c.count) for c in result.classes] == [(ErrorClass.OTHER, 1)]

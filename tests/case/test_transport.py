"""Our AIPerf transport's request start at the first byte written, on AIPerf's own records."""

from __future__ import annotations

from aiperf.common.models import AioHttpTraceData, ErrorDetails, RequestRecord

from inferlab_bench.case.aiperf_plugin.transport import start_at_first_byte

WALL = 1_800_000_000_000_000_000


def record(sent: int | None, chunks: int = 1, **kwargs: object) -> RequestRecord:
    trace = AioHttpTraceData(request_send_end_perf_ns=sent, request_chunks_count=chunks)
    return RequestRecord(start_perf_ns=1_000, timestamp_ns=WALL, trace_data=trace, **kwargs)


def test_the_start_moves_to_the_write_and_the_wall_clock_with_it() -> None:
    moved = record(sent=1_450)
    assert start_at_first_byte(moved) == 450
    assert (moved.start_perf_ns, moved.timestamp_ns) == (1_450, WALL + 450)


def test_nothing_moves_without_one_write_before_the_stamp_or_on_a_failure() -> None:
    for kept in (
        record(sent=None),
        record(sent=1_450, chunks=2),  # the first of several writes is not in AIPerf's trace
        record(sent=900),  # a stamp before AIPerf's own start: not this request's write
        record(sent=1_450, error=ErrorDetails(code=500, type="x", message="failed")),
        RequestRecord(start_perf_ns=1_000, timestamp_ns=WALL),
    ):
        assert start_at_first_byte(kept) is None
        assert (kept.start_perf_ns, kept.timestamp_ns) == (1_000, WALL)

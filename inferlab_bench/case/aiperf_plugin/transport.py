"""AIPerf's HTTP transport with its keep-alive pool filled before the first request.

AIPerf opens a connection the first time a request finds none free in its pool, and it
opens it inside the request: after the request-start stamp, so the TCP connect and
aiohttp's first-use work (1-5 ms on loopback, measured) land in that request's TTFT. At
concurrency ``c`` the first ``c`` requests of the run pay it: 4 of 32 at c=4, which is
the p90. ``PreconnectedTransport`` opens ``connections`` of them at start-up with
``GET /v1/models`` (any answer leaves a keep-alive connection in the pool), so every
measured request finds one waiting. Without ``INFERLAB_PRECONNECT`` it opens none ahead.

AIPerf stamps a request's start before it hands the request to aiohttp, whose own work
(session, headers, a task hop before the body is written: 0.2-0.3 ms at p50 on 2 cores,
measured) then lands in every TTFT and latency. With ``INFERLAB_WIRE_START=1`` the start
moves to the moment the request's bytes go to the socket (aiohttp's ``on_request_chunk_sent``
for a body written in one piece), as GuideLLM stamps its start at the header write. AIPerf's
``credit_drop_latency`` (credit received -> start) then includes aiohttp's work, and its HTTP
trace metrics (``http_req_sending`` and the rest) are unchanged.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiohttp
import orjson
from aiperf.common.hooks import on_init, on_stop
from aiperf.transports.aiohttp_transport import AioHttpTransport

from inferlab_bench.case.aiperf_plugin.switches import PRECONNECT_ENV_VAR, WIRE_START_ENV_VAR

PRECONNECT_TIMEOUT_SECONDS = 5.0


class PreconnectedTransport(AioHttpTransport):  # type: ignore[misc]
    """AIPerf's aiohttp transport that opens its pool's connections before the first credit."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.preconnected = 0
        self.wire_start = os.environ.get(WIRE_START_ENV_VAR) == "1"
        self.moved: list[int] = []  # per request, how far the start moved (ns)
        self.unmoved = 0

    async def send_request(
        self, request_info: Any, payload: Any, *, first_token_callback: Any = None
    ) -> Any:
        record = await super().send_request(
            request_info, payload, first_token_callback=first_token_callback
        )
        if self.wire_start:
            shift = start_at_first_byte(record)
            if shift is None:
                self.unmoved += 1
            else:
                self.moved.append(shift)
        return record

    @on_stop  # type: ignore[untyped-decorator]
    async def _report_wire_start(self) -> None:
        if not self.wire_start:
            return
        moved = sorted(self.moved)
        middle = moved[len(moved) // 2] / 1e3 if moved else 0.0
        self.notice(
            f"inferlab: start at the first byte written for {len(moved)} of "
            f"{len(moved) + self.unmoved} requests, moved by {middle:.0f} us at p50"
        )

    @on_init  # type: ignore[untyped-decorator]
    async def _preconnect(self) -> None:
        text = os.environ.get(PRECONNECT_ENV_VAR)
        client = self.aiohttp_client
        if not text or client is None or client.tcp_connector is None:
            return
        settings = orjson.loads(text)
        url, count = str(settings["url"]), int(settings["connections"])
        timeout = aiohttp.ClientTimeout(total=PRECONNECT_TIMEOUT_SECONDS)
        async with aiohttp.ClientSession(
            connector=client.tcp_connector, connector_owner=False, timeout=timeout
        ) as session:
            # All at once: each GET finds every other connection busy and opens its own.
            done = await asyncio.gather(
                *(_touch(session, url) for _ in range(count)), return_exceptions=True
            )
        self.preconnected = sum(1 for ok in done if ok is True)
        self.notice(f"inferlab: {self.preconnected} of {count} connections opened before load")


async def _touch(session: aiohttp.ClientSession, url: str) -> bool:
    async with session.get(url) as response:
        await response.read()  # read to the end, so the connection goes back to the pool
        return True


def start_at_first_byte(record: Any) -> int | None:
    """Move ``record``'s start to its first byte written to the socket; the shift in ns.

    aiohttp's ``on_request_chunk_sent`` fires right before each body write, the first one
    carrying the buffered headers. For a body written in one piece (AIPerf's encoded JSON)
    that stamp is AIPerf's ``request_send_end_perf_ns``; the wall-clock ``timestamp_ns``
    moves with it so that the pair stays one instant. None (nothing moved): a failed
    request, a body in several pieces, or no trace.
    """
    trace: Any = getattr(record, "trace_data", None)
    sent = getattr(trace, "request_send_end_perf_ns", None)
    if record.error is not None or sent is None or trace.request_chunks_count != 1:
        return None
    shift = int(sent) - int(record.start_perf_ns)
    if shift < 0:
        return None
    record.start_perf_ns += shift
    record.timestamp_ns += shift
    return shift

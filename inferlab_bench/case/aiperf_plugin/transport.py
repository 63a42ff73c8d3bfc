"""AIPerf's HTTP transport with its keep-alive pool filled before the first request.

AIPerf opens a connection the first time a request finds none free in its pool, and it
opens it inside the request: after the request-start stamp, so the TCP connect and
aiohttp's first-use work (1-5 ms on loopback, measured) land in that request's TTFT. At
concurrency ``c`` the first ``c`` requests of the run pay it: 4 of 32 at c=4, which is
the p90. ``PreconnectedTransport`` opens ``connections`` of them at start-up with
``GET /v1/models`` (any answer leaves a keep-alive connection in the pool), so every
measured request finds one waiting. Without ``INFERLAB_PRECONNECT`` it is AIPerf's own.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiohttp
import orjson
from aiperf.common.hooks import on_init
from aiperf.transports.aiohttp_transport import AioHttpTransport

from inferlab_bench.case.aiperf_plugin.hook import PRECONNECT_ENV_VAR

PRECONNECT_TIMEOUT_SECONDS = 5.0


class PreconnectedTransport(AioHttpTransport):  # type: ignore[misc]
    """AIPerf's aiohttp transport that opens its pool's connections before the first credit."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.preconnected = 0

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

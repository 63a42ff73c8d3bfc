"""The HTTP protocol the simulator serves with: arrival stamps, and idle connections closed.

uvicorn closes a keep-alive connection that stays idle after a response, but any byte
received re-arms nothing and cancels that timer, and a connection that never completes its
first request head is kept forever: a client can hold sockets open by sending nothing, or a
header byte now and then (slowloris). Here one timer runs from a connection's opening, and
again from each response's end, until the next request head is complete; when it fires with
no request in progress the connection is closed. A body that is slow to come is the route's
to time out (``intake``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from inferlab_bench.simulator.arrival import stamping_protocol


def serving_protocol(idle_timeout: float) -> type | None:
    """uvicorn's httptools protocol with both behaviours; None without httptools."""
    base: Any = stamping_protocol()
    if base is None:
        return None

    class IdleClosingProtocol(base):  # type: ignore[misc]
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(idle_timeout, self._idle)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _idle(self) -> None:
            self._head_timer = None
            if self.cycle is None or self.cycle.response_complete:
                self.transport.close()

    return IdleClosingProtocol

"""When a request reached the server: the moment its first bytes were parsed.

The ground truth's TTFT and end-to-end latency start at arrival. Stamped in the route
handler, arrival would come after the HTTP parse, the routing and any wait for the event
loop, time a client's clock counts and a server's log does not. With httptools (what
uvicorn picks when it is installed) the protocol stamps each request when the parser
sees its first byte and leaves the stamp in the ASGI scope's ``state``; without it the
handler stamps it as before, and the trace says which.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ARRIVAL_KEY = "inferlab.arrival"


@dataclass(frozen=True)
class Arrival:
    """Wall-clock ns (for the trace) and monotonic s (for the latency model), and where."""

    time_ns: int
    monotonic: float
    stamped_at: str  # "parser" (first byte parsed) or "handler" (route entered)

    @classmethod
    def now(cls, stamped_at: str) -> Arrival:
        return cls(time.time_ns(), time.monotonic(), stamped_at)


def arrival_of(scope: Mapping[str, Any]) -> Arrival:
    """The parser's stamp for this request if the protocol left one, else now."""
    stamp = scope.get("state", {}).get(ARRIVAL_KEY)
    return stamp if isinstance(stamp, Arrival) else Arrival.now("handler")


def stamping_protocol() -> type | None:
    """uvicorn's httptools protocol, stamping each request's arrival; None without httptools."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is an optional extra of uvicorn
        return None

    class ArrivalStampingProtocol(HttpToolsProtocol):
        def on_message_begin(self) -> None:
            arrival = Arrival.now("parser")
            super().on_message_begin()
            self.scope["state"][ARRIVAL_KEY] = arrival

    return ArrivalStampingProtocol

"""AIPerf's HTTP connection settings per server: a shared pool, or one connection per request.

AIPerf keeps a pool of keep-alive connections. A server that closes the connection after
each streamed response while still answering ``Keep-Alive`` (llama.cpp's llama-server)
makes a request that picks a just-closed pooled connection fail with ``Server
disconnected``: a failure the client caused. For such servers AIPerf is told to close
every connection after its request (``AIPERF_HTTP_FORCE_CLOSE=true`` with
``AIPERF_HTTP_KEEPALIVE_TIMEOUT=0``; force-close alone makes AIPerf fail at start-up).
The choice and where it came from are recorded in ``connections.json``; what our own AIPerf
transport adds to it is ``aiperf_plugin.switches``'.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from inferlab_bench.case.identity import models_owner
from inferlab_bench.errors import ConfigurationError

OPTION_HELP = "auto|pooled|close"
ENV_VAR = "INFERLAB_CONNECTIONS"
SCHEMA_VERSION = 1


class ConnectionPolicy(enum.StrEnum):
    """How AIPerf uses HTTP connections."""

    POOLED = "pooled"
    """AIPerf's default: keep-alive connections shared by all requests."""
    CLOSE = "close"
    """A fresh connection per request, closed after its response."""


CLOSE_ENV = {"AIPERF_HTTP_FORCE_CLOSE": "true", "AIPERF_HTTP_KEEPALIVE_TIMEOUT": "0"}
"""AIPerf 0.13's settings (aiperf/common/environment.py, ``_HTTPSettings``) for CLOSE."""
_CLOSE_AFTER_RESPONSE = {
    "llamacpp": "llama.cpp's llama-server closes the connection after each streamed response"
}
"""Servers (by their GET /v1/models ``owned_by``) known to close connections under the pool."""


@dataclass(frozen=True)
class ConnectionChoice:
    """The policy, why it was chosen, and the environment it gives AIPerf."""

    policy: ConnectionPolicy
    origin: str
    reason: str = ""
    env: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "policy": self.policy.value,
            "origin": self.origin,
            "reason": self.reason,
            "aiperf_environment": dict(self.env),
        }


def parse_option(text: str | None) -> ConnectionPolicy | None:
    """``pooled`` / ``close`` -> that policy; ``auto`` or None -> None (ask the server)."""
    if text is None or text.strip().lower() in ("", "auto"):
        return None
    try:
        return ConnectionPolicy(text.strip().lower())
    except ValueError:
        raise ConfigurationError(
            f"--connections: expected {OPTION_HELP}, found {text!r}",
            hint="close opens one connection per request (for servers that drop pooled ones)",
        ) from None


def choose(base_url: str, option: str | None, timeout: float = 5.0) -> ConnectionChoice:
    """The option when given, else what the server says it is (GET /v1/models ``owned_by``)."""
    policy = parse_option(option)
    if policy is not None:
        return _choice(policy, f"--connections {policy.value}", "asked for")
    owner = models_owner(base_url, timeout)
    reason = _CLOSE_AFTER_RESPONSE.get(owner or "")
    origin = f"detected from GET /v1/models owned_by {owner!r}"
    if reason is not None:
        return _choice(ConnectionPolicy.CLOSE, origin, reason)
    return _choice(ConnectionPolicy.POOLED, origin, "AIPerf's default connection pool")


def _choice(policy: ConnectionPolicy, origin: str, reason: str) -> ConnectionChoice:
    env = dict(CLOSE_ENV) if policy is ConnectionPolicy.CLOSE else {}
    return ConnectionChoice(policy=policy, origin=origin, reason=reason, env=env)

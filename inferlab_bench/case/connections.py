"""AIPerf's HTTP connection settings per server: a shared pool, or one connection per request.

AIPerf keeps a pool of keep-alive connections. A server that closes the connection after
each streamed response while still answering ``Keep-Alive`` (llama.cpp's llama-server)
makes a request that picks a just-closed pooled connection fail with ``Server
disconnected``: a failure the client caused. For such servers AIPerf is told to close
every connection after its request (``AIPERF_HTTP_FORCE_CLOSE=true`` with
``AIPERF_HTTP_KEEPALIVE_TIMEOUT=0``; force-close alone makes AIPerf fail at start-up).
The choice and where it came from are recorded in ``connections.json``.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

import orjson

from inferlab_bench.case.aiperf_plugin.hook import PRECONNECT_ENV_VAR, WIRE_START_ENV_VAR
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


PRECONNECT_MAX = 32
"""Most connections opened ahead per AIPerf worker (each worker has a pool of its own)."""


def with_preconnect(
    choice: ConnectionChoice, base_url: str, concurrency: int | None
) -> ConnectionChoice:
    """The choice plus our transport's pre-opened connections: one per concurrent request.

    Only for a pooled concurrency load (a rate load's need is not known ahead; a closing
    server gets a fresh connection per request anyway). ``aiperf_plugin.transport`` reads it.
    """
    if choice.policy is not ConnectionPolicy.POOLED or concurrency is None:
        return choice
    target = {
        "url": base_url.rstrip("/") + "/v1/models",
        "connections": min(concurrency, PRECONNECT_MAX),
    }
    env = choice.env | {PRECONNECT_ENV_VAR: orjson.dumps(target).decode()}
    return dataclasses.replace(choice, env=env)


def with_wire_start(choice: ConnectionChoice) -> ConnectionChoice:
    """The choice plus our transport's request start at the first byte written.

    Only on a pooled server, where a request's connection is already open (opened ahead
    under a concurrency load): with a connection per request (``close``) the connect stays
    inside the request's time, as AIPerf measures it. ``aiperf_plugin.transport`` reads it.
    """
    if choice.policy is not ConnectionPolicy.POOLED:
        return choice
    return dataclasses.replace(choice, env=choice.env | {WIRE_START_ENV_VAR: "1"})


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

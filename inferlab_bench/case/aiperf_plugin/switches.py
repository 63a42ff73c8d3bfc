"""What the case stage changes in AIPerf, and how each change is switched on.

Every change is a plugin of ours that AIPerf's config names (``plugins.yaml``); none replaces
a built-in, so a plain ``aiperf profile`` beside our package runs AIPerf as shipped, and an
engine whose AIPerf has no plugin of ours (Kubernetes) names none. docs/case.md, "What we
change in AIPerf", has one row per switch with the A/B behind it.

- credit wait: the profiling phase's timing strategy is ``inferlab_credit_wait``
  (``strategy.py``); AIPerf 0.13 runs a warmup with its own ``request_rate`` whatever the
  config says, and that warmup's polling is left alone (it measures nothing).
- reset after warmup, planned schedule: the profiling phase's is ``inferlab_reset_after_warmup``.
- connections opened ahead, start at the first byte: the transport is ``inferlab_http``
  (``transport.py``), each part switched on by an environment variable set here.
- bookkeeping priorities: from outside AIPerf, by the runner (``priorities.py``).
"""

from __future__ import annotations

import dataclasses

import orjson

from inferlab_bench.case.connections import ConnectionChoice, ConnectionPolicy

CREDIT_WAIT_TIMING_MODE = "inferlab_credit_wait"
RESET_AFTER_WARMUP_TIMING_MODE = "inferlab_reset_after_warmup"
TRANSPORT = "inferlab_http"
PRECONNECT_ENV_VAR = "INFERLAB_PRECONNECT"
"""JSON ``{"url": <GET target>, "connections": n}``: our transport opens n connections at
start-up (``transport.PreconnectedTransport``)."""
WIRE_START_ENV_VAR = "INFERLAB_WIRE_START"
"""``1``: our transport takes a request's start when its bytes go to the socket, not before
aiohttp's own work (``transport.start_at_first_byte``)."""
PRECONNECT_MAX = 32
"""Most connections opened ahead per AIPerf worker (each worker has a pool of its own)."""


def with_preconnect(
    choice: ConnectionChoice, base_url: str, concurrency: int | None
) -> ConnectionChoice:
    """The choice plus our transport's pre-opened connections: one per concurrent request.

    Only for a pooled concurrency load (a rate load's need is not known ahead; a closing
    server gets a fresh connection per request anyway).
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
    inside the request's time, as AIPerf measures it.
    """
    if choice.policy is not ConnectionPolicy.POOLED:
        return choice
    return dataclasses.replace(choice, env=choice.env | {WIRE_START_ENV_VAR: "1"})

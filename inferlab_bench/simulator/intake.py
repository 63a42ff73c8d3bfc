"""Reading a request body within the server's bounds: its media type, its size, its time."""

from __future__ import annotations

import asyncio

from starlette.requests import ClientDisconnect, Request

from inferlab_bench.simulator.body import Rejection
from inferlab_bench.simulator.config import LimitsConfig


async def read_body(request: Request, limits: LimitsConfig) -> bytes | Rejection:
    """The whole body, or the 415 / 413 / 408 that refuses it before it is all read.

    A declared length beyond the bound is refused before one byte of the body is read; a
    chunked body, as soon as it grows past it. The connection stays open and the rest of
    a refused body is read and dropped by the protocol (so the client sees the answer
    instead of a reset), until the idle timeout closes it.
    """
    kind = request.headers.get("content-type")
    if kind is not None and not _is_json(kind):
        return Rejection(
            415,
            f"Content-Type must be application/json, got {kind!r}",
            "UnsupportedMediaTypeError",
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limits.max_body_bytes:
        return _too_large(limits, f"declared {declared} bytes")
    try:
        async with asyncio.timeout(limits.body_timeout_seconds):
            return await _collect(request, limits)
    except TimeoutError:
        return Rejection(
            408,
            f"request body not received within {limits.body_timeout_seconds:g} s "
            "(the server's --body-timeout-seconds)",
            "RequestTimeoutError",
            close=True,
        )
    except ClientDisconnect:
        return Rejection(400, "client disconnected while sending the body", close=True)


async def _collect(request: Request, limits: LimitsConfig) -> bytes | Rejection:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limits.max_body_bytes:
            return _too_large(limits, f"more than {limits.max_body_bytes} bytes sent")
    return bytes(body)


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _too_large(limits: LimitsConfig, found: str) -> Rejection:
    return Rejection(
        413,
        f"request body too large: at most {limits.max_body_bytes} bytes served, {found} "
        "(the server's --max-body-bytes bound)",
        "RequestTooLargeError",
    )

"""A TCP proxy that widens llama-server's close-after-response race: it closes late.

llama-server closes the connection right after each streamed response although it
answers ``Keep-Alive``; a pooled client that sends its next request on that connection
before the FIN arrives loses the request (``Server disconnected``). How often that happens
depends on timing. This proxy makes it certain: when the server closes, the proxy keeps
the client's side open for ``linger`` seconds, swallows whatever the client sends, then
closes it. A client that reuses connections fails its next request on each of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from tests.engine.server import free_port


@dataclass(frozen=True)
class RunningProxy:
    base_url: str


@contextlib.contextmanager
def late_closing_proxy(upstream_port: int, linger: float = 0.5) -> Iterator[RunningProxy]:
    port = free_port()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    server: list[asyncio.base_events.Server] = []

    async def start() -> None:
        server.append(
            await asyncio.start_server(
                lambda r, w: _serve(r, w, upstream_port, linger), "127.0.0.1", port
            )
        )
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop)
    ready.wait(timeout=10)
    try:
        yield RunningProxy(f"http://127.0.0.1:{port}")
    finally:

        async def stop() -> None:
            server[0].close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


async def _serve(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_port: int,
    linger: float,
) -> None:
    upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
    upward = asyncio.ensure_future(_pipe(client_reader, upstream_writer))
    try:
        while chunk := await upstream_reader.read(65536):
            client_writer.write(chunk)
            await client_writer.drain()
        # The server closed: keep the client's side open a while, as if the FIN were late.
        upward.cancel()
        with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
            await asyncio.wait_for(_drain_forever(client_reader), timeout=linger)
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        upward.cancel()
        for writer in (client_writer, upstream_writer):
            with contextlib.suppress(Exception):
                writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.CancelledError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()


async def _drain_forever(reader: asyncio.StreamReader) -> None:
    while await reader.read(65536):
        pass
    await asyncio.sleep(3600)  # the client closed first: nothing more to wait for

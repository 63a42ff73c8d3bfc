"""Serving one generation: slot, prefill, timed tokens, faults, and its ground-truth record."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from inferlab_bench.simulator import native, responses, wire
from inferlab_bench.simulator.body import GenerationRequest
from inferlab_bench.simulator.ground_truth import GroundTruthLog, RequestTrace
from inferlab_bench.simulator.logprobs import chat_logprobs, completion_logprobs
from inferlab_bench.simulator.plan import RequestPlan, token_id, token_text
from inferlab_bench.simulator.prefix_cache import PrefixCache
from inferlab_bench.simulator.scheduler import Scheduler, SequenceClock


class DroppedConnection(Exception):  # noqa: N818 - a signal to uvicorn, not an error of ours
    """Raised inside a response to make uvicorn close the socket mid-body (drop fault)."""


@dataclass
class Job:
    """Everything one admitted generation needs."""

    request: GenerationRequest
    token_ids: list[int]  # every prompt's ids, one after the other (a batch has several)
    plan: RequestPlan
    envelope: wire.Envelope
    trace: RequestTrace
    index: int
    arrival_monotonic: float
    # time_ns() - monotonic() in ns at arrival: turns the model's monotonic due times
    # into wall-clock ns comparable with the trace's stamps.
    wall_offset_ns: int = 0
    prompt_ids: list[list[int]] = field(default_factory=list)  # per prompt, for the cache

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            self.prompt_ids = [self.token_ids]

    def text(self, choice: int, position: int) -> str:
        """The token at ``position`` of ``choice`` (choices differ in their words)."""
        return token_text(self.index + choice, position)

    def logprobs(self, choice: int, positions: range, offset: int = 0) -> dict[str, Any] | None:
        """``logprobs`` of ``choice`` over ``positions``, if the request asked for them."""
        top = self.request.logprobs
        if top is None:
            return None
        if self.envelope.chat:
            return chat_logprobs(self.index + choice, positions, top)
        return completion_logprobs(self.index + choice, positions, top, offset)

    def usage(self, completion_tokens: int | None = None) -> wire.Usage:
        """Usage as reported (the prompt-tokens fault applies here only).

        ``completion_tokens`` defaults to the tokens written so far.
        """
        prompt = len(self.token_ids) + self.plan.prompt_tokens_offset
        self.trace.reported_prompt_tokens = prompt
        done = self.trace.completion_tokens if completion_tokens is None else completion_tokens
        return wire.Usage(prompt, done, self.trace.cached_tokens)

    def native_object(self, text: str, done: int, last: bool) -> dict[str, Any]:
        """SGLang's ``/generate`` object after ``done`` tokens (the final one if ``last``)."""
        finish = native.finish_reason(self.plan.finish_reason, done) if last else None
        e2e = time.monotonic() - self.arrival_monotonic if last else None
        ids = [token_id(self.index, pos) for pos in range(done)]
        return native.generate_object(self.envelope, text, ids, self.usage(done), finish, e2e)


@dataclass
class Backend:
    """The shared machinery every generation runs on."""

    scheduler: Scheduler
    cache: PrefixCache
    log: GroundTruthLog


class Tick(NamedTuple):
    """One token falling due: its position and the model's wall-clock due time (ns)."""

    position: int
    due_ns: int


async def timed_tokens(backend: Backend, job: Job) -> AsyncGenerator[Tick, None]:
    """Yield tokens 0..n-1, each at its modeled time, holding a slot meanwhile."""
    at_once = await backend.scheduler.acquire(job.index)
    try:
        job.trace.admitted_ns = time.time_ns()
        job.trace.cached_tokens = sum(backend.cache.lookup(ids) for ids in job.prompt_ids)
        start = job.arrival_monotonic if at_once else time.monotonic()
        clock = SequenceClock(backend.scheduler, start)
        await clock.prefill(len(job.token_ids) - job.trace.cached_tokens)
        for ids in job.prompt_ids:
            backend.cache.insert(ids)
        # Choices (n > 1, a batch of prompts) decode in lockstep on this one slot.
        for position in range(job.plan.ticks):
            if position:
                await clock.next_token()
            yield Tick(position, job.wall_offset_ns + round(clock.due * 1e9))
    finally:
        backend.scheduler.release(job.index)


class _Generation(Response):
    """A response that writes its own ASGI messages (Starlette only awaits it)."""

    content_type = b"application/json"

    def __init__(self, backend: Backend, job: Job) -> None:
        # Not Response.__init__: it would add "content-length: 0" to a streamed body.
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", self.content_type)]
        if job.trace.x_request_id is not None:
            # vLLM echoes the header (--enable-request-id-headers) so a client can join on it.
            self.raw_headers.append((b"x-request-id", job.trace.x_request_id.encode("latin-1")))
        self.backend = backend
        self.job = job
        self._logged = False
        self._offsets: dict[int, int] = {}  # per choice: text written so far (text_offset)
        self._text = ""  # what a /generate or /v1/responses stream has written
        request = job.request
        self._plain = request.choices == 1 and request.logprobs is None
        self._plain = self._plain and not request.continuous_usage

    def _log(self) -> None:
        """Write the ground-truth record, once.

        Called before the last byte is sent (and, for drops, before uvicorn closes the
        socket), so a client that has seen the end of its response finds the record.
        """
        if not self._logged:
            self._logged = True
            self.job.trace.end_ns = time.time_ns()
            self.backend.log.append(self.job.trace.record())


class StreamingGeneration(_Generation):
    """An SSE response written token by token, timestamped after each write."""

    content_type = b"text/event-stream; charset=utf-8"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.Event()
        watcher = asyncio.create_task(_watch_disconnect(receive, gone))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            await self._body(send, gone)
        except (asyncio.CancelledError, OSError):
            self.job.trace.status = 499
            raise
        finally:
            watcher.cancel()
            self._log()

    async def _body(self, send: Send, gone: asyncio.Event) -> None:
        job = self.job
        n = job.plan.ticks
        async with aclosing(timed_tokens(self.backend, job)) as ticks:
            async for pos, due_ns in ticks:
                if gone.is_set():
                    job.trace.status = 499
                    return
                _maybe_drop(job.plan, pos)
                chunk, emitted = self._chunk(pos, n)
                # Stamped on both sides of the write: the bytes left within [before, after],
                # and how late the loop was against the model's schedule shows apart.
                before = time.time_ns()
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                job.trace.token_sent(before, time.time_ns(), due_ns, emitted)
        tail = self._tail(n)
        self._log()
        await send({"type": "http.response.body", "body": tail, "more_body": False})

    def _chunk(self, pos: int, n: int) -> tuple[bytes, int]:
        """What this API's stream writes at ``pos`` (of ``n``), and how many tokens it holds."""
        job, env = self.job, self.job.envelope
        bad = wire.MALFORMED if pos == job.plan.malformed_after else b""
        if not (env.native or env.responses):
            if self._plain:  # the hot path: one choice, no logprobs, no running usage
                head = wire.role_chunk(env) if pos == 0 and env.chat else b""
                reason = job.plan.finish_reason if pos == n - 1 else None
                return head + bad + wire.token_chunk(env, job.text(0, pos), reason), 1
            return self._openai_chunks(pos, bad)
        token = job.text(0, pos)
        self._text += token
        if env.native:  # SGLang's events are cumulative
            return bad + wire.sse(job.native_object(self._text, pos + 1, last=pos == n - 1)), 1
        head = self._created() if pos == 0 else b""
        return head + bad + responses.delta_event(env, token, pos + 1), 1

    def _created(self) -> bytes:
        started = responses.response_object(self.job.envelope, "", None, None)
        return responses.event("response.created", 0, response=started)

    def _openai_chunks(self, pos: int, bad: bytes) -> tuple[bytes, int]:
        """The chunks of every choice still running at ``pos``, and how many tokens."""
        job, env = self.job, self.job.envelope
        reasons = job.plan.choice_finish_reasons
        continuous = job.request.continuous_usage
        wants_logprobs = job.request.logprobs is not None
        done = job.trace.completion_tokens
        parts: list[bytes] = []
        for choice, length in enumerate(job.plan.choice_lengths):
            if pos >= length:
                continue
            if pos == 0 and env.chat:
                usage = job.usage(done) if continuous else None
                parts.append(wire.role_chunk(env, choice, usage))
            if choice == 0:
                parts.append(bad)  # the malformed-chunk fault goes before the token
            token = job.text(choice, pos)
            logprobs = None
            if wants_logprobs:  # off the hot path: most requests ask for none
                offset = self._offsets.get(choice, 0)
                self._offsets[choice] = offset + len(token)
                logprobs = job.logprobs(choice, range(pos, pos + 1), offset)
            reason = reasons[choice] if pos == length - 1 else None
            done += 1
            usage = job.usage(done) if continuous else None
            parts.append(wire.token_chunk(env, token, reason, choice, logprobs, usage))
        return b"".join(parts), done - job.trace.completion_tokens

    def _tail(self, n: int) -> bytes:
        job = self.job
        if job.plan.drop_after is not None:
            raise DroppedConnection(f"dropped after {n} tokens")
        late = job.plan.malformed_after is not None and job.plan.malformed_after >= n
        bad = wire.MALFORMED if late else b""
        job.trace.finish_reason = job.plan.finish_reason
        if job.envelope.native:
            # The last token's event carried the finish; with no token, one event says it.
            final = wire.sse(job.native_object("", 0, last=True)) if n == 0 else b""
            return bad + final + wire.DONE
        if job.envelope.responses:
            head = self._created() if n == 0 else b""
            whole = responses.response_object(
                job.envelope, self._text, job.usage(), job.plan.finish_reason
            )
            return head + bad + responses.event("response.completed", n + 1, response=whole)
        head = b""
        if n == 0 and job.envelope.chat:
            head = b"".join(wire.role_chunk(job.envelope, c) for c in range(job.request.choices))
        usage = wire.usage_chunk(job.envelope, job.usage()) if job.request.include_usage else b""
        return head + bad + usage + wire.DONE


class CompleteGeneration(_Generation):
    """A non-streaming response: the whole body once the last token is due."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        job = self.job
        try:
            body = await self._generate()
            headers = [*self.raw_headers, (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            if job.plan.drop_after is not None:
                await send(
                    {
                        "type": "http.response.body",
                        "body": body[: len(body) // 2],
                        "more_body": True,
                    }
                )
                raise DroppedConnection(job.trace.request_id)
            self._log()
            await send({"type": "http.response.body", "body": body, "more_body": False})
        except (asyncio.CancelledError, OSError):
            job.trace.status = 499
            raise
        finally:
            self._log()

    async def _generate(self) -> bytes:
        job = self.job
        lengths = job.plan.choice_lengths
        async with aclosing(timed_tokens(self.backend, job)) as ticks:
            async for pos, due_ns in ticks:
                now = time.time_ns()  # nothing is written until the whole body is ready
                job.trace.token_sent(now, now, due_ns, sum(pos < k for k in lengths))
        job.trace.finish_reason = job.plan.finish_reason
        texts = ["".join(job.text(c, p) for p in range(k)) for c, k in enumerate(lengths)]
        if job.envelope.native:
            body = job.native_object(texts[0], lengths[0], last=True)
        elif job.envelope.responses:
            reason = job.plan.finish_reason
            body = responses.response_object(job.envelope, texts[0], job.usage(), reason)
        else:
            choices = [
                wire.Choice(c, texts[c], reason, job.logprobs(c, range(lengths[c])))
                for c, reason in enumerate(job.plan.choice_finish_reasons)
            ]
            body = wire.full_body(job.envelope, choices, job.usage())
        raw = orjson.dumps(body)
        return raw[:-1] if job.plan.malformed_after is not None else raw


def _maybe_drop(plan: RequestPlan, position: int) -> None:
    if plan.drop_after is not None and position >= plan.drop_after:
        raise DroppedConnection(f"dropped after {position} tokens")


async def _watch_disconnect(receive: Receive, gone: asyncio.Event) -> None:
    while True:
        message: dict[str, Any] = dict(await receive())
        if message["type"] == "http.disconnect":
            gone.set()
            return

"""The HTTP routes of the simulated server (Starlette), wired to one ``Simulator`` state."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from collections.abc import Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from inferlab_bench import __version__
from inferlab_bench.errors import TokenizerError
from inferlab_bench.simulator import limits, native, responses, tokens, wire
from inferlab_bench.simulator.arrival import Arrival, arrival_of
from inferlab_bench.simulator.body import GenerationRequest, Rejection, parse
from inferlab_bench.simulator.config import RESET_PATHS, SimulatorConfig
from inferlab_bench.simulator.generation import (
    Backend,
    CompleteGeneration,
    Job,
    StreamingGeneration,
)
from inferlab_bench.simulator.ground_truth import GroundTruthLog, RequestTrace, reset_record
from inferlab_bench.simulator.intake import read_body
from inferlab_bench.simulator.latency import Engine
from inferlab_bench.simulator.metrics import ServerMetrics
from inferlab_bench.simulator.plan import make_plan, request_rng
from inferlab_bench.simulator.prefix_cache import PrefixCache
from inferlab_bench.simulator.prompt import Overlong, PromptTokenizer, flatten_content
from inferlab_bench.simulator.scheduler import Scheduler

SERVER_VERSION = f"0.11.0+inferlab.sim.{__version__}"
SIMULATOR_HEADER = "x-inferlab-simulator"
"""On GET /v1/models: this server is inferlab-bench's simulator (the value is its version), so
a client may ask it for the truth of its own requests at ``TRUTH_PATH``. A real server never
sends it, and the client never asks a server that did not."""
TRUTH_PATH = "/inferlab/ground-truth"
"""POST ``{"x_request_ids": [...]}``: the ground-truth records of those requests."""


class Simulator:
    """The server's state: engine, prefix cache, tokenizer, ground truth, reset counter."""

    def __init__(self, config: SimulatorConfig, log: GroundTruthLog) -> None:
        self.config = config
        self.log = log
        self.tokenizer = PromptTokenizer(config.tokenizer)
        self.backend = Backend(
            scheduler=Scheduler(Engine(config.latency, config.seed)),
            cache=PrefixCache(config.block_size, config.cache_capacity_blocks),
            log=log,
        )
        self.metrics = ServerMetrics()
        log.subscribe(self.metrics.observe)
        self.reset_count = 0
        self.created = int(time.time())
        self._arrivals = itertools.count()

    async def generate(self, request: Request, *, chat: bool) -> Response:
        """Serve ``/v1/chat/completions`` (chat) or ``/v1/completions``."""
        return await self._generation(request, lambda raw: parse(raw, chat=chat))

    async def generate_responses(self, request: Request) -> Response:
        """Serve OpenAI's ``/v1/responses`` (basic text)."""
        return await self._generation(request, responses.parse_responses)

    async def generate_native(self, request: Request) -> Response:
        """Serve SGLang's ``/generate``."""
        return await self._generation(request, native.parse_generate)

    async def _generation(
        self, request: Request, parser: Callable[[bytes], GenerationRequest | Rejection]
    ) -> Response:
        arrival, handler_ns = arrival_of(request.scope), time.time_ns()
        raw = await read_body(request, self.config.limits)
        parsed = raw if isinstance(raw, Rejection) else parser(raw)
        return await self._checked(request, parsed, arrival, handler_ns)

    async def _checked(
        self,
        request: Request,
        parsed: GenerationRequest | Rejection,
        arrival: Arrival,
        handler_ns: int,
    ) -> Response:
        request_id = request.headers.get("x-request-id")
        if isinstance(parsed, Rejection):
            return _error(parsed, request_id)
        if parsed.model is not None and parsed.model != self.config.model:
            missing = f"The model `{parsed.model}` does not exist."
            return _error(Rejection(404, missing, "NotFoundError"), request_id)
        beyond = limits.check(parsed, self.config)
        if beyond is not None:
            return _error(beyond, request_id)
        return await self._serve(request, parsed, arrival, handler_ns)

    async def _serve(
        self, request: Request, parsed: GenerationRequest, arrival: Arrival, handler_ns: int
    ) -> Response:
        try:
            prompt_ids = await self._prompt_ids(parsed)
        except TokenizerError as exc:
            return _error(Rejection(400, exc.message), request.headers.get("x-request-id"))
        if isinstance(prompt_ids, Overlong):
            # Counted, never listed: the record says how long the refused prompt was.
            trace = _trace(request, parsed, next(self._arrivals), arrival, prompt_ids.tokens)
            trace.handler_ns = handler_ns
            return self._reject(
                trace, Rejection(400, _too_long(self.config, prompt_ids.tokens, parsed))
            )
        token_ids = prompt_ids[0] if len(prompt_ids) == 1 else [i for p in prompt_ids for i in p]
        index = next(self._arrivals)
        trace = _trace(request, parsed, index, arrival, len(token_ids))
        trace.handler_ns = handler_ns
        arrival_monotonic = arrival.monotonic
        longest = max(len(ids) for ids in prompt_ids)  # each prompt must fit on its own
        room = self.config.max_model_len - longest
        if room < (parsed.sampling.max_tokens or 0) or room < 1:
            return self._reject(trace, Rejection(400, _too_long(self.config, longest, parsed)))
        limit = min(room, self.config.default_max_tokens)
        rng = request_rng(self.config.seed, index)
        plan = make_plan(parsed.sampling, limit, self.config.faults, rng, parsed.choices)
        trace.fault = plan.fault
        if plan.stall_seconds:
            await asyncio.sleep(plan.stall_seconds)
            arrival_monotonic = time.monotonic()  # the stall comes on top of the model
        if plan.error_status is not None:
            return self._reject(
                trace, Rejection(plan.error_status, "injected fault", _kind(plan.error_status))
            )
        env = wire.Envelope(
            trace.request_id,
            int(time.time()),
            self.config.model,
            chat=parsed.chat,
            native=parsed.native,
            responses=parsed.responses,
        )
        offset = arrival.time_ns - round(arrival.monotonic * 1e9)
        job = Job(parsed, token_ids, plan, env, trace, index, arrival_monotonic, offset, prompt_ids)
        kind = StreamingGeneration if parsed.stream else CompleteGeneration
        return kind(self.backend, job)

    async def _prompt_ids(self, parsed: GenerationRequest) -> list[list[int]] | Overlong:
        """Each prompt's ids, or the first one's count beyond ``max_model_len``."""
        limit = self.config.max_model_len
        if parsed.chat:
            found = await self.tokenizer.chat_prompt(parsed.messages, parsed.template_kwargs, limit)
            return found if isinstance(found, Overlong) else [found]
        prompts: list[list[int]] = []
        for prompt in parsed.prompts:
            if isinstance(prompt, list):
                ids: list[int] | Overlong = (
                    list(prompt) if len(prompt) <= limit else Overlong(len(prompt))
                )
            else:
                ids = await self.tokenizer.text_prompt(prompt, limit)
            if isinstance(ids, Overlong):
                return ids
            prompts.append(ids)
        return prompts

    def _reject(self, trace: RequestTrace, rejection: Rejection) -> Response:
        trace.status = rejection.status
        trace.error = rejection.message
        trace.end_ns = time.time_ns()
        self.log.append(trace.record())
        return _error(rejection, trace.x_request_id)

    def reset(self, path: str) -> Response:
        """Empty the prefix cache (unless the reset_noop fault is on) and log it."""
        noop = self.config.faults.reset_noop
        cleared = 0 if noop else self.backend.cache.clear()
        self.reset_count += 1
        self.log.append(reset_record(path, 200, cleared, "reset_noop" if noop else None))
        if path == RESET_PATHS["sglang"]:
            return PlainTextResponse(native.FLUSHED)
        return Response(status_code=200)

    async def tokenize(self, request: Request) -> Response:
        """vLLM's ``POST /tokenize`` for a prompt or chat messages."""
        body = await self._json(request)
        if isinstance(body, Rejection):
            return _error(body)
        return _answer(await tokens.tokenize(body, self.tokenizer, self.config))

    async def detokenize(self, request: Request) -> Response:
        """vLLM's ``POST /detokenize``: token ids back to text."""
        body = await self._json(request)
        if isinstance(body, Rejection):
            return _error(body)
        return _answer(await tokens.detokenize(body, self.tokenizer, self.config))

    async def _json(self, request: Request) -> Any:
        """The request's JSON body (within the bounds), or a Rejection saying why not."""
        raw = await read_body(request, self.config.limits)
        if isinstance(raw, Rejection):
            return raw
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return Rejection(400, f"request body is not valid JSON: {exc}")

    def server_info(self) -> Response:
        """SGLang's ``GET /server_info`` (and ``/get_server_info``)."""
        engine = self.backend.scheduler.engine
        return JSONResponse(
            native.server_info(
                model=self.config.model,
                tokenizer=self.config.tokenizer,
                max_model_len=self.config.max_model_len,
                max_running=self.config.latency.max_num_seqs,
                page_size=self.config.block_size,
                seed=self.config.seed,
                running=engine.running,
                waiting=engine.waiting,
                version=f"{native.SGLANG_VERSION}+inferlab.sim.{__version__}",
            )
        )

    def prometheus(self) -> Response:
        """vLLM's ``GET /metrics`` (Prometheus text), counted from the ground truth."""
        engine = self.backend.scheduler.engine
        text = self.metrics.render(self.config.model, engine.running, engine.waiting)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    def model_info(self) -> Response:
        """SGLang's ``GET /model_info`` (and ``/get_model_info``)."""
        return JSONResponse(native.model_info(self.config.model, self.config.tokenizer))

    def models(self) -> Response:
        """``GET /v1/models``, announcing the simulator (``SIMULATOR_HEADER``)."""
        return JSONResponse(
            wire.models_body(self.config.model, self.created, self.config.max_model_len),
            headers={SIMULATOR_HEADER: __version__},
        )

    async def ground_truth(self, request: Request) -> Response:
        """``POST TRUTH_PATH``: the request records whose X-Request-ID is among those asked."""
        body = await self._json(request)
        if isinstance(body, Rejection):
            return _error(body)
        ids = body.get("x_request_ids") if isinstance(body, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return _error(Rejection(400, 'expected {"x_request_ids": [string, ...]}'))
        wanted = set(ids)
        found = [
            r
            for r in self.log.records()
            if r.get("kind") == "request" and r.get("x_request_id") in wanted
        ]
        return Response(orjson.dumps({"records": found}), media_type="application/json")

    def model(self, name: str) -> Response:
        """``GET /v1/models/{id}``: the one card, or 404 for any other name."""
        if name != self.config.model:
            return _error(Rejection(404, f"The model `{name}` does not exist.", "NotFoundError"))
        body = wire.models_body(self.config.model, self.created, self.config.max_model_len)
        return JSONResponse(body["data"][0])


def build_app(sim: Simulator) -> Starlette:
    """The ASGI application serving ``sim``."""

    async def chat(request: Request) -> Response:
        return await sim.generate(request, chat=True)

    async def completions(request: Request) -> Response:
        return await sim.generate(request, chat=False)

    async def ok(request: Request) -> Response:
        return Response(status_code=200)

    async def version(request: Request) -> Response:
        return JSONResponse({"version": SERVER_VERSION})

    async def models(request: Request) -> Response:
        return sim.models()

    async def model(request: Request) -> Response:
        return sim.model(request.path_params["model"])

    async def server_info(request: Request) -> Response:
        return sim.server_info()

    async def model_info(request: Request) -> Response:
        return sim.model_info()

    async def prometheus(request: Request) -> Response:
        return sim.prometheus()

    routes = [
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/responses", sim.generate_responses, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route(TRUTH_PATH, sim.ground_truth, methods=["POST"]),
        Route("/v1/models/{model:path}", model, methods=["GET"]),
        Route("/health", ok, methods=["GET"]),
        Route("/ping", ok, methods=["GET", "POST"]),
        Route("/version", version, methods=["GET"]),
        Route("/metrics", prometheus, methods=["GET"]),
        Route("/tokenize", sim.tokenize, methods=["POST"]),
        Route("/detokenize", sim.detokenize, methods=["POST"]),
        Route("/generate", sim.generate_native, methods=["POST", "PUT"]),
        Route("/server_info", server_info, methods=["GET"]),
        Route("/get_server_info", server_info, methods=["GET"]),
        Route("/model_info", model_info, methods=["GET"]),
        Route("/get_model_info", model_info, methods=["GET"]),
        *_reset_routes(sim),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: _http_error})


def _reset_routes(sim: Simulator) -> list[Route]:
    routes = []
    for name in sim.config.reset_endpoints:
        path = RESET_PATHS[name]
        methods = ["POST"] if name == "vllm" else ["GET", "POST"]

        async def reset(request: Request, path: str = path) -> Response:
            return sim.reset(path)

        routes.append(Route(path, reset, methods=methods))
    return routes


def _trace(
    request: Request, parsed: GenerationRequest, index: int, arrival: Arrival, prompt_tokens: int
) -> RequestTrace:
    prefix = _id_prefix(parsed)
    trace = RequestTrace(
        request_id=f"{prefix}-sim-{index:08d}",
        request_index=index,
        path=request.url.path,
        stream=parsed.stream,
        arrival_ns=arrival.time_ns,
        arrival_stamped_at=arrival.stamped_at,
        prompt_tokens=prompt_tokens,
        max_tokens=parsed.sampling.max_tokens,
        min_tokens=parsed.sampling.min_tokens,
        choices=parsed.choices,
        ignore_eos=parsed.sampling.ignore_eos,
        x_request_id=request.headers.get("x-request-id"),
        x_correlation_id=request.headers.get("x-correlation-id"),
    )
    _identify(trace, parsed)
    return trace


def _id_prefix(parsed: GenerationRequest) -> str:
    if parsed.responses:
        return "resp"
    if parsed.chat:
        return "chatcmpl"
    return "generate" if parsed.native else "cmpl"


def _identify(trace: RequestTrace, parsed: GenerationRequest) -> None:
    # Hashes that let a reader join these records to a population entry or a client record.
    if not parsed.chat:
        trace.prompt_sha256 = _sha(orjson.dumps(parsed.prompt))
        return
    messages = flatten_content(parsed.messages)
    trace.prompt_sha256 = _sha(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS))
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    if users:
        trace.first_user_sha256 = _sha(users[0].encode())
        trace.last_user_sha256 = _sha(users[-1].encode())


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _too_long(config: SimulatorConfig, prompt_tokens: int, parsed: GenerationRequest) -> str:
    return (
        f"This model's maximum context length is {config.max_model_len} tokens. However, "
        f"you requested {prompt_tokens + (parsed.sampling.max_tokens or 0)} tokens "
        f"({prompt_tokens} in the messages, {parsed.sampling.max_tokens or 0} in the completion)."
    )


def _kind(status: int) -> str:
    return {429: "RateLimitError", 500: "InternalServerError", 503: "ServiceUnavailableError"}.get(
        status, "APIError"
    )


def _error(rejection: Rejection, request_id: str | None = None) -> Response:
    headers = {"retry-after": "1"} if rejection.status == 429 else {}
    if rejection.close:
        headers["connection"] = "close"
    if request_id is not None:
        headers["x-request-id"] = request_id
    body: dict[str, Any] = wire.error_body(rejection.message, rejection.kind, rejection.status)
    return JSONResponse(body, status_code=rejection.status, headers=headers)


def _answer(answer: dict[str, Any] | Rejection) -> Response:
    return _error(answer) if isinstance(answer, Rejection) else JSONResponse(answer)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "Internal Server Error"
    return JSONResponse({"detail": detail}, status_code=status)

"""Reading an OpenAI request body into the few fields the simulator acts on (pure)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import orjson

from inferlab_bench.simulator.plan import Sampling

# vLLM's default --max-logprobs.
MAX_LOGPROBS = 20


@dataclass(frozen=True)
class Rejection:
    """An HTTP error answer instead of a generation."""

    status: int
    message: str
    kind: str = "BadRequestError"
    close: bool = False  # answer with ``Connection: close`` (a client too slow to keep)


@dataclass(frozen=True)
class GenerationRequest:
    """A parsed chat or text completion request."""

    chat: bool
    model: str | None
    sampling: Sampling
    stream: bool
    include_usage: bool
    messages: list[dict[str, Any]] = field(default_factory=list)
    # A completion prompt as sent: one text or id list, or a list of them (a batch).
    prompt: str | list[int] | list[str] | list[list[int]] = ""
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    native: bool = False  # SGLang's /generate rather than an OpenAI route
    responses: bool = False  # OpenAI's /v1/responses (a chat underneath)
    n: int = 1
    logprobs: int | None = None  # alternatives per token when logprobs are asked for
    continuous_usage: bool = False  # usage on every streamed chunk

    @functools.cached_property
    def prompts(self) -> list[str | list[int]]:
        """The single prompts of a completion request (a batch is several)."""
        prompt: Any = self.prompt
        # Parsing checked the shape: one text, one id list, or a list of either.
        if isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)):
            return [prompt]
        return list(prompt)

    @property
    def choices(self) -> int:
        """Choices in the answer: ``n`` for each prompt."""
        return self.n * (1 if self.chat else len(self.prompts))


def json_object(raw: bytes) -> dict[str, Any] | Rejection:
    """A request body as a JSON object, or the 400 that says why it is not one."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return Rejection(400, f"request body is not valid JSON: {exc}")
    if not isinstance(body, dict):
        return Rejection(400, "request body must be a JSON object")
    return body


def parse(raw: bytes, *, chat: bool) -> GenerationRequest | Rejection:
    """Decode and check a request body; a Rejection says why it cannot be served."""
    body = json_object(raw)
    if isinstance(body, Rejection):
        return body
    sampling = _sampling(body)
    if isinstance(sampling, Rejection):
        return sampling
    extras = _extras(body, chat)
    if isinstance(extras, Rejection):
        return extras
    return _with_input(body, chat, sampling, extras)


def _extras(body: Mapping[str, Any], chat: bool) -> dict[str, Any] | Rejection:
    n = body.get("n", 1)
    if n is None:
        n = 1
    if not _is_int(n) or n < 1:
        return Rejection(400, f"n must be a positive integer, got {n!r}")
    logprobs = _chat_logprobs(body) if chat else _completion_logprobs(body)
    if isinstance(logprobs, Rejection):
        return logprobs
    options = body.get("stream_options")
    options = {} if options is None else options
    if not isinstance(options, Mapping):
        return Rejection(400, "stream_options must be an object")
    for name in ("include_usage", "continuous_usage_stats"):
        if not isinstance(options.get(name, False), bool | None):
            return Rejection(400, f"stream_options.{name} must be a boolean")
    usage = bool(options.get("include_usage"))
    return {
        "n": n,
        "logprobs": logprobs,
        "include_usage": usage,
        "continuous_usage": usage and bool(options.get("continuous_usage_stats")),
    }


def _chat_logprobs(body: Mapping[str, Any]) -> int | None | Rejection:
    asked, top = body.get("logprobs"), body.get("top_logprobs")
    if asked is not None and not isinstance(asked, bool):
        return Rejection(400, f"logprobs must be a boolean, got {asked!r}")
    if top is not None and (not _is_int(top) or not 0 <= top <= MAX_LOGPROBS):
        return Rejection(400, f"top_logprobs must be an integer 0..{MAX_LOGPROBS}, got {top!r}")
    if top and not asked:
        return Rejection(400, "top_logprobs needs logprobs: true")
    return (top or 0) if asked else None


def _completion_logprobs(body: Mapping[str, Any]) -> int | None | Rejection:
    top = body.get("logprobs")
    if top is not None and (not _is_int(top) or not 0 <= top <= MAX_LOGPROBS):
        return Rejection(400, f"logprobs must be an integer 0..{MAX_LOGPROBS}, got {top!r}")
    return top


def _is_batch(value: Any) -> TypeGuard[list[str] | list[list[int]]]:
    """A non-empty list of strings, or of token-id lists."""
    if not isinstance(value, list) or not value:
        return False
    return set(map(type, value)) == {str} or all(is_token_ids(p) for p in value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _with_input(
    body: dict[str, Any], chat: bool, sampling: Sampling, extras: dict[str, Any]
) -> GenerationRequest | Rejection:
    common: dict[str, Any] = {
        "chat": chat,
        "model": body.get("model"),
        "sampling": sampling,
        "stream": bool(body.get("stream", False)),
        **extras,
    }
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return Rejection(400, "messages: a non-empty list is required")
        bad = bad_message(messages)
        if bad is not None:
            return bad
        kwargs = body.get("chat_template_kwargs") or {}
        if not isinstance(kwargs, dict):
            return Rejection(400, "chat_template_kwargs must be an object")
        return GenerationRequest(messages=messages, template_kwargs=kwargs, **common)
    prompt = body.get("prompt")
    if isinstance(prompt, str) or is_token_ids(prompt):
        return GenerationRequest(prompt=prompt, **common)
    if _is_batch(prompt):
        return GenerationRequest(prompt=prompt, **common)
    return Rejection(
        400, "prompt: a string, a list of token ids, or a non-empty list of either is required"
    )


def bad_message(messages: list[Any]) -> Rejection | None:
    """The 400 for the first message that is not a role with text content (or parts)."""
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return Rejection(400, f"messages[{i}]: an object with a string role is required")
        content = message.get("content")
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list) or not all(_is_part(p) for p in content):
            return Rejection(
                400, f"messages[{i}].content: a string or a list of content parts is required"
            )
    return None


def _is_part(part: Any) -> bool:
    return isinstance(part, dict) and isinstance(part.get("text", ""), str)


def _sampling(body: dict[str, Any]) -> Sampling | Rejection:
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    min_tokens = body.get("min_tokens")
    for name, value in (("max_tokens", max_tokens), ("min_tokens", min_tokens)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            return Rejection(400, f"{name} must be a non-negative integer, got {value!r}")
    if max_tokens is not None and min_tokens is not None and min_tokens > max_tokens:
        return Rejection(400, f"min_tokens ({min_tokens}) must be <= max_tokens ({max_tokens})")
    return Sampling(
        max_tokens=max_tokens, min_tokens=min_tokens, ignore_eos=bool(body.get("ignore_eos", False))
    )


def is_token_ids(value: Any) -> TypeGuard[list[int]]:
    """A non-empty list of integers (booleans excluded)."""
    # Types compared in C: a body of a million ids is checked in milliseconds (JSON gives
    # plain ints; a bool is its own type, so it is not one).
    return isinstance(value, list) and bool(value) and set(map(type, value)) == {int}

"""Reading an OpenAI request body into the few fields the simulator acts on (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import orjson

from inferlab_bench.simulator.plan import Sampling


@dataclass(frozen=True)
class Rejection:
    """An HTTP error answer instead of a generation."""

    status: int
    message: str
    kind: str = "BadRequestError"


@dataclass(frozen=True)
class GenerationRequest:
    """A parsed chat or text completion request."""

    chat: bool
    model: str | None
    sampling: Sampling
    stream: bool
    include_usage: bool
    messages: list[dict[str, Any]] = field(default_factory=list)
    prompt: str | list[int] = ""
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    native: bool = False  # SGLang's /generate rather than an OpenAI route


def parse(raw: bytes, *, chat: bool) -> GenerationRequest | Rejection:
    """Decode and check a request body; a Rejection says why it cannot be served."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return Rejection(400, f"request body is not valid JSON: {exc}")
    if not isinstance(body, dict):
        return Rejection(400, "request body must be a JSON object")
    sampling = _sampling(body)
    if isinstance(sampling, Rejection):
        return sampling
    if body.get("n", 1) != 1:
        return Rejection(400, "the simulator serves n=1 only")
    return _with_input(body, chat, sampling)


def _with_input(
    body: dict[str, Any], chat: bool, sampling: Sampling
) -> GenerationRequest | Rejection:
    options = body.get("stream_options") or {}
    common: dict[str, Any] = {
        "chat": chat,
        "model": body.get("model"),
        "sampling": sampling,
        "stream": bool(body.get("stream", False)),
        "include_usage": bool(isinstance(options, Mapping) and options.get("include_usage")),
    }
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return Rejection(400, "messages: a non-empty list is required")
        kwargs = body.get("chat_template_kwargs") or {}
        if not isinstance(kwargs, dict):
            return Rejection(400, "chat_template_kwargs must be an object")
        return GenerationRequest(messages=messages, template_kwargs=kwargs, **common)
    prompt = body.get("prompt")
    if isinstance(prompt, str) or is_token_ids(prompt):
        return GenerationRequest(prompt=prompt, **common)
    return Rejection(400, "prompt: a string or a list of token ids is required")


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
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    )

"""OpenAI-compatible bodies and SSE chunks shaped as vLLM sends them (pure, orjson)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

DONE = b"data: [DONE]\n\n"
# Deliberately broken JSON in a data: line, for the malformed-chunk fault.
MALFORMED = b'data: {"id": "broken", "choices": [{"delta": {"content": "\n\n'


@dataclass(frozen=True)
class Usage:
    """Token counts as reported to the client."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int

    def body(self) -> dict[str, Any]:
        """The OpenAI ``usage`` object with ``prompt_tokens_details.cached_tokens``."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "completion_tokens": self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        }


@dataclass(frozen=True)
class Envelope:
    """The fields every chunk of one response shares."""

    request_id: str
    created: int
    model: str
    chat: bool
    native: bool = False  # SGLang /generate events instead of OpenAI chunks
    responses: bool = False  # /v1/responses events instead of chat chunks

    @property
    def chunk_object(self) -> str:
        """``object`` of a streamed chunk."""
        return "chat.completion.chunk" if self.chat else "text_completion"


def sse(payload: dict[str, Any]) -> bytes:
    """One SSE event carrying ``payload`` as JSON."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _chunk(env: Envelope, choices: list[dict[str, Any]], usage: Usage | None = None) -> bytes:
    payload: dict[str, Any] = {
        "id": env.request_id,
        "object": env.chunk_object,
        "created": env.created,
        "model": env.model,
        "choices": choices,
    }
    if usage is not None:
        payload["usage"] = usage.body()
    return sse(payload)


def role_chunk(env: Envelope, index: int = 0, usage: Usage | None = None) -> bytes:
    """The first chat chunk of a choice: the assistant role and empty content."""
    delta = {"role": "assistant", "content": ""}
    choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": None}
    return _chunk(env, [choice], usage)


def token_chunk(
    env: Envelope,
    text: str,
    finish_reason: str | None,
    index: int = 0,
    logprobs: dict[str, Any] | None = None,
    usage: Usage | None = None,
) -> bytes:
    """One generated token of choice ``index``; its last one carries the finish reason.

    ``usage`` is set on every chunk under ``stream_options.continuous_usage_stats``.
    """
    if env.chat:
        choice = {
            "index": index,
            "delta": {"content": text},
            "logprobs": logprobs,
            "finish_reason": finish_reason,
        }
    else:
        choice = {
            "index": index,
            "text": text,
            "logprobs": logprobs,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }
    return _chunk(env, [choice], usage)


def usage_chunk(env: Envelope, usage: Usage) -> bytes:
    """The trailing ``include_usage`` chunk: no choices, only usage."""
    return _chunk(env, [], usage)


@dataclass(frozen=True)
class Choice:
    """One finished choice of a non-streaming answer."""

    index: int
    text: str
    finish_reason: str
    logprobs: dict[str, Any] | None = None


def _choice_body(env: Envelope, choice: Choice) -> dict[str, Any]:
    if env.chat:
        return {
            "index": choice.index,
            "message": {
                "role": "assistant",
                "content": choice.text,
                "reasoning_content": None,
                "tool_calls": [],
            },
            "logprobs": choice.logprobs,
            "finish_reason": choice.finish_reason,
            "stop_reason": None,
        }
    return {
        "index": choice.index,
        "text": choice.text,
        "logprobs": choice.logprobs,
        "finish_reason": choice.finish_reason,
        "stop_reason": None,
        "prompt_logprobs": None,
    }


def full_body(env: Envelope, choices: list[Choice], usage: Usage) -> dict[str, Any]:
    """A non-streaming chat or text completion response."""
    return {
        "id": env.request_id,
        "object": "chat.completion" if env.chat else "text_completion",
        "created": env.created,
        "model": env.model,
        "choices": [_choice_body(env, c) for c in choices],
        "usage": usage.body(),
        "prompt_logprobs": None,
    }


def error_body(message: str, kind: str, status: int) -> dict[str, Any]:
    """vLLM's error response shape."""
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def models_body(model: str, created: int, max_model_len: int) -> dict[str, Any]:
    """``GET /v1/models`` as vLLM answers it."""
    card = {
        "id": model,
        "object": "model",
        "created": created,
        "owned_by": "vllm",
        "root": model,
        "parent": None,
        "max_model_len": max_model_len,
        "permission": [
            {
                "id": f"modelperm-{model}",
                "object": "model_permission",
                "created": created,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }
    return {"object": "list", "data": [card]}

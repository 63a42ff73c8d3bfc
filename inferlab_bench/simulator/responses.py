"""OpenAI's Responses API, the basic text form (``POST /v1/responses``): bodies and events (pure).

A request gives ``input`` (a string, or messages whose content is a string or
``input_text`` parts) and optionally ``instructions`` (a system message) and
``max_output_tokens``. The stream is named SSE events: ``response.created``, one
``response.output_text.delta`` per token, then ``response.completed`` carrying the whole
response with its usage; there is no ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from inferlab_bench.simulator.body import GenerationRequest, Rejection, json_object
from inferlab_bench.simulator.plan import Sampling
from inferlab_bench.simulator.wire import Envelope, Usage


def parse_responses(raw: bytes) -> GenerationRequest | Rejection:
    """Decode and check a ``/v1/responses`` body into a chat generation."""
    body = json_object(raw)
    if isinstance(body, Rejection):
        return body
    messages = _messages(body.get("input"))
    if isinstance(messages, Rejection):
        return messages
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        return Rejection(400, "instructions must be a string")
    if instructions:
        messages.insert(0, {"role": "system", "content": instructions})
    limit = body.get("max_output_tokens")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        return Rejection(400, f"max_output_tokens must be a positive integer, got {limit!r}")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        return Rejection(400, f"stream must be a boolean, got {stream!r}")
    return GenerationRequest(
        chat=True,
        responses=True,
        model=body.get("model"),
        sampling=Sampling(max_tokens=limit, min_tokens=None, ignore_eos=False),
        stream=stream,
        include_usage=False,
        messages=messages,
    )


def _messages(value: Any) -> list[dict[str, Any]] | Rejection:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        return Rejection(400, "input: a string or a non-empty list of messages is required")
    messages = []
    for i, item in enumerate(value):
        text = _text(item.get("content")) if isinstance(item, Mapping) else None
        if text is None or not isinstance(item.get("role"), str):
            return Rejection(400, f"input[{i}]: a message with a role and text content is required")
        messages.append({"role": item["role"], "content": text})
    return messages


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, Mapping) and p.get("type") in ("input_text", "output_text") for p in content
    ):
        return "\n".join(str(p.get("text", "")) for p in content)
    return None


def response_object(
    env: Envelope, text: str, usage: Usage | None, finish_reason: str | None
) -> dict[str, Any]:
    """The response object: in progress (no usage yet) or completed / incomplete."""
    done = usage is not None
    status = (
        "in_progress" if not done else "incomplete" if finish_reason == "length" else "completed"
    )
    output = []
    if done:
        output.append(
            {
                "type": "message",
                "id": f"msg_{env.request_id}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    return {
        "id": env.request_id,
        "object": "response",
        "created_at": env.created,
        "model": env.model,
        "status": status,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "output": output,
        "usage": None if usage is None else _usage(usage),
    }


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


def event(kind: str, sequence: int, **fields: Any) -> bytes:
    """One named SSE event of a streamed response."""
    payload = {"type": kind, "sequence_number": sequence, **fields}
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def delta_event(env: Envelope, text: str, sequence: int) -> bytes:
    """``response.output_text.delta`` carrying one token."""
    item = f"msg_{env.request_id}"
    return event(
        "response.output_text.delta",
        sequence,
        item_id=item,
        output_index=0,
        content_index=0,
        delta=text,
    )

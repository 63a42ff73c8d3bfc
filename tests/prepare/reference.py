"""The straightforward reference of sharegpt-single-request-v1, written as plainly as possible.

One ``apply_chat_template(..., tokenize=True)`` per candidate, no caching, no bounds, no
batching: the definition the fast path must equal byte for byte.
"""

from __future__ import annotations

import hashlib
from typing import Any


def reference_select(
    records: list[Any],
    tokenizer: Any,
    *,
    seed: int,
    required: int,
    max_input_tokens: int,
    output_tokens: int | None,
    template_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    kwargs = template_kwargs or {}
    roles = {"human": "user", "gpt": "assistant"}
    reasons: dict[str, int] = {}
    admitted = []
    for i, record in enumerate(records):
        sid = (
            record.get("id")
            if isinstance(record, dict) and isinstance(record.get("id"), str)
            else f"row-{i}"
        )
        outcome = _one(record, roles, tokenizer, max_input_tokens, output_tokens, kwargs)
        if isinstance(outcome, str):
            reasons[outcome] = reasons.get(outcome, 0) + 1
        else:
            key = int.from_bytes(hashlib.sha256(f"{seed}\0{sid}\0{i}".encode()).digest(), "big")
            admitted.append((key, i, sid, outcome))
    admitted.sort(key=lambda item: (item[0], item[1]))
    return {
        "reasons": dict(sorted(reasons.items())),
        "admitted": len(admitted),
        "candidates": len(records),
        "chosen": admitted[:required],
    }


def _one(
    record: Any,
    roles: dict[str, str],
    tokenizer: Any,
    max_input: int,
    output_tokens: int | None,
    kwargs: dict[str, Any],
) -> Any:
    turns = record.get("conversations") if isinstance(record, dict) else None
    if not isinstance(turns, list):
        return "invalid_conversation"
    messages = []
    for position, turn in enumerate(turns):
        if not isinstance(turn, dict) or roles.get(turn.get("from")) != (
            "user" if position % 2 == 0 else "assistant"
        ):
            return "invalid_conversation"
        if not isinstance(turn.get("value"), str):
            return "invalid_conversation"
        messages.append({"role": roles[turn["from"]], "content": turn["value"]})
    if len(messages) < 2 or messages[-1]["role"] != "assistant":
        return "missing_assistant_target"
    end = len(messages) - 1
    while end >= 1:
        prompt = messages[:end]
        if prompt[-1]["content"].strip():
            ids = tokenizer.apply_chat_template(
                prompt, add_generation_prompt=True, tokenize=True, **kwargs
            )
            count = len(ids["input_ids"] if hasattr(ids, "keys") else ids)
            if count <= max_input:
                break
        end -= 2
    else:
        return "input_exceeds_maximum"
    target = messages[end]["content"]
    target_tokens = len(tokenizer.encode(target, add_special_tokens=False))
    if not target.strip() or target_tokens == 0:
        return "empty_assistant_target"
    if output_tokens is None and target_tokens < 2:
        return "assistant_target_shorter_than_two_tokens"
    return {
        "messages": prompt,
        "target": target,
        "input_tokens": count,
        "output_length": output_tokens if output_tokens is not None else target_tokens,
    }

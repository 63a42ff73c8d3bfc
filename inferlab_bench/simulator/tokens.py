"""vLLM's ``/tokenize`` and ``/detokenize`` answers for a parsed body."""

from __future__ import annotations

from typing import Any

from inferlab_bench.errors import TokenizerError
from inferlab_bench.simulator.body import Rejection, bad_message, is_token_ids
from inferlab_bench.simulator.config import SimulatorConfig
from inferlab_bench.simulator.limits import too_many_messages
from inferlab_bench.simulator.prompt import Overlong, PromptTokenizer


async def tokenize(
    body: Any, tokenizer: PromptTokenizer, config: SimulatorConfig
) -> dict[str, Any] | Rejection:
    """``{"count", "max_model_len", "tokens", "token_strs"}`` for a prompt or chat messages.

    A prompt beyond ``max_model_len`` is refused with its count (vLLM lists its ids).
    """
    if not isinstance(body, dict):
        return Rejection(400, "request body must be a JSON object")
    strs = body.get("return_token_strs", False)
    if not isinstance(strs, bool):
        return Rejection(400, f"return_token_strs must be a boolean, got {strs!r}")
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        return Rejection(400, "chat_template_kwargs must be an object")
    limit = config.max_model_len
    messages = body.get("messages")
    try:
        if isinstance(messages, list):
            beyond = too_many_messages(len(messages), config) or bad_message(messages)
            if beyond is not None:
                return beyond
            ids = await tokenizer.chat_prompt(messages, kwargs, limit)
        elif isinstance(body.get("prompt"), str):
            ids = await tokenizer.text_prompt(body["prompt"], limit)
        else:
            return Rejection(400, "prompt (string) or messages (list) is required")
    except TokenizerError as exc:
        return Rejection(400, exc.message)
    if isinstance(ids, Overlong):
        return Rejection(
            400, f"prompt has {ids.tokens} tokens, more than max_model_len {limit}: not listed"
        )
    return {
        "count": len(ids),
        "max_model_len": limit,
        "tokens": ids,
        "token_strs": await tokenizer.strs_of(ids) if strs else None,
    }


async def detokenize(
    body: Any, tokenizer: PromptTokenizer, config: SimulatorConfig
) -> dict[str, Any] | Rejection:
    """``{"prompt": text}`` for ``{"tokens": [ids]}`` (at most ``max_model_len`` of them)."""
    tokens = body.get("tokens") if isinstance(body, dict) else None
    if not is_token_ids(tokens) or min(tokens) < 0:
        return Rejection(400, "tokens: a non-empty list of non-negative token ids is required")
    if len(tokens) > config.max_model_len:
        return Rejection(
            400, f"tokens: at most max_model_len {config.max_model_len} ids, got {len(tokens)}"
        )
    try:
        return {"prompt": await tokenizer.text_of(tokens)}
    except TokenizerError as exc:
        return Rejection(400, exc.message)

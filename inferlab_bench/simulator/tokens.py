"""vLLM's ``/tokenize`` and ``/detokenize`` answers for a parsed body."""

from __future__ import annotations

from typing import Any

from inferlab_bench.errors import TokenizerError
from inferlab_bench.simulator.body import Rejection, is_token_ids
from inferlab_bench.simulator.prompt import PromptTokenizer


def tokenize(
    body: Any, tokenizer: PromptTokenizer, max_model_len: int
) -> dict[str, Any] | Rejection:
    """``{"count", "max_model_len", "tokens", "token_strs"}`` for a prompt or chat messages."""
    if not isinstance(body, dict):
        return Rejection(400, "request body must be a JSON object")
    strs = body.get("return_token_strs", False)
    if not isinstance(strs, bool):
        return Rejection(400, f"return_token_strs must be a boolean, got {strs!r}")
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        return Rejection(400, "chat_template_kwargs must be an object")
    try:
        if isinstance(body.get("messages"), list):
            ids = tokenizer.chat_ids(body["messages"], kwargs)
        elif isinstance(body.get("prompt"), str):
            ids = tokenizer.text_ids(body["prompt"])
        else:
            return Rejection(400, "prompt (string) or messages (list) is required")
    except TokenizerError as exc:
        return Rejection(400, exc.message)
    return {
        "count": len(ids),
        "max_model_len": max_model_len,
        "tokens": ids,
        "token_strs": tokenizer.token_strs(ids) if strs else None,
    }


def detokenize(body: Any, tokenizer: PromptTokenizer) -> dict[str, Any] | Rejection:
    """``{"prompt": text}`` for ``{"tokens": [ids]}``."""
    tokens = body.get("tokens") if isinstance(body, dict) else None
    if not is_token_ids(tokens) or any(t < 0 for t in tokens):
        return Rejection(400, "tokens: a non-empty list of non-negative token ids is required")
    try:
        return {"prompt": tokenizer.decode(tokens)}
    except TokenizerError as exc:
        return Rejection(400, exc.message)

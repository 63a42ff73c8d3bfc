"""The counts a client controls, checked against the server's bounds before tokenizing (pure)."""

from __future__ import annotations

from inferlab_bench.simulator.body import GenerationRequest, Rejection
from inferlab_bench.simulator.config import SimulatorConfig


def check(request: GenerationRequest, config: SimulatorConfig) -> Rejection | None:
    """The 400 for the first count beyond its bound, or None when the request is in bounds.

    Each bound only refuses what the server could not serve anyway or what would make one
    answer unboundedly large; a flag of the same name raises it (``--max-n``...).
    """
    limits = config.limits
    if request.n > limits.max_n:
        return _beyond("n", request.n, limits.max_n, "--max-n")
    if request.chat and len(request.messages) > limits.max_messages:
        return _beyond("messages", len(request.messages), limits.max_messages, "--max-messages")
    if not request.chat and len(request.prompts) > limits.max_prompts:
        return _beyond(
            "prompt (a batch)", len(request.prompts), limits.max_prompts, "--max-prompts"
        )
    max_tokens = request.sampling.max_tokens
    if max_tokens is not None and max_tokens > config.max_model_len:
        # Exact without the prompt: any prompt adds at least nothing.
        return Rejection(
            400,
            f"This model's maximum context length is {config.max_model_len} tokens. However, "
            f"you requested more than {max_tokens} tokens ({max_tokens} in the completion).",
        )
    cap = max_tokens if max_tokens is not None else config.default_max_tokens
    answer = request.choices * cap * (1 + (request.logprobs or 0))
    if answer > limits.max_answer_tokens:
        return Rejection(
            400,
            f"this answer would hold {answer} tokens (choices {request.choices} x output cap "
            f"{cap} x (1 + logprobs {request.logprobs or 0})), more than the server's "
            f"max_answer_tokens {limits.max_answer_tokens} (--max-answer-tokens)",
        )
    return None


def too_many_messages(count: int, config: SimulatorConfig) -> Rejection | None:
    """The 400 for ``/tokenize`` messages beyond ``max_messages``, or None."""
    bound = config.limits.max_messages
    return _beyond("messages", count, bound, "--max-messages") if count > bound else None


def _beyond(name: str, found: int, bound: int, flag: str) -> Rejection:
    return Rejection(
        400, f"{name}: at most {bound} served, got {found} (the server's {flag} bound)"
    )

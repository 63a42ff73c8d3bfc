"""SGLang's native API as SGLang 0.5 answers it: ``/generate`` bodies and events, info pages (pure).

A ``/generate`` stream is cumulative: every ``data:`` event carries the whole text so far
and ``meta_info`` with the running ``completion_tokens``; the last one carries the finish
reason (``{"type": "length", "length": N}`` or ``{"type": "stop", "matched": ...}``) and
``e2e_latency``. Then ``data: [DONE]``. A non-streaming answer is the last event's object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferlab_bench.simulator.body import GenerationRequest, Rejection, is_token_ids, json_object
from inferlab_bench.simulator.plan import Sampling
from inferlab_bench.simulator.wire import Envelope, Usage

# SGLang's SamplingParams default when a request gives no max_new_tokens.
DEFAULT_MAX_NEW_TOKENS = 128
SGLANG_VERSION = "0.5.23"
FLUSHED = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running "
    "or waiting requests, the operation will not be performed.)\n"
)


def parse_generate(raw: bytes) -> GenerationRequest | Rejection:
    """Decode and check a ``/generate`` body (one prompt: ``text`` or ``input_ids``)."""
    body = json_object(raw)
    if isinstance(body, Rejection):
        return body
    prompt = _prompt(body)
    if isinstance(prompt, Rejection):
        return prompt
    params = body.get("sampling_params")
    params = {} if params is None else params
    if not isinstance(params, dict):
        return Rejection(400, "sampling_params must be an object")
    sampling = _sampling(params)
    if isinstance(sampling, Rejection):
        return sampling
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        return Rejection(400, f"stream must be a boolean, got {stream!r}")
    return GenerationRequest(
        chat=False,
        native=True,
        model=None,
        sampling=sampling,
        stream=stream,
        include_usage=False,
        prompt=prompt,
    )


def _prompt(body: Mapping[str, Any]) -> str | list[int] | Rejection:
    text, ids = body.get("text"), body.get("input_ids")
    if text is not None and ids is not None:
        return Rejection(400, "text and input_ids: give one of them, not both")
    if isinstance(text, str):
        return text
    if is_token_ids(ids):
        return ids
    if isinstance(text, list) or (isinstance(ids, list) and ids and isinstance(ids[0], list)):
        return Rejection(400, "text / input_ids: batches are not served, send one prompt each")
    return Rejection(400, "text (a string) or input_ids (a list of token ids) is required")


def _sampling(params: Mapping[str, Any]) -> Sampling | Rejection:
    max_new = params.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    min_new = params.get("min_new_tokens")
    for name, value in (("max_new_tokens", max_new), ("min_new_tokens", min_new)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            return Rejection(
                400, f"sampling_params.{name} must be a non-negative integer, got {value!r}"
            )
    if max_new is not None and min_new is not None and min_new > max_new:
        return Rejection(
            400, f"sampling_params.min_new_tokens ({min_new}) must be <= max_new_tokens ({max_new})"
        )
    temperature = params.get("temperature", 1.0)
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or temperature < 0:
        return Rejection(
            400, f"sampling_params.temperature must be a number >= 0, got {temperature!r}"
        )
    ignore_eos = params.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        return Rejection(400, f"sampling_params.ignore_eos must be a boolean, got {ignore_eos!r}")
    return Sampling(max_tokens=max_new, min_tokens=min_new, ignore_eos=ignore_eos)


def finish_reason(reason: str, length: int) -> dict[str, Any]:
    """SGLang's finish reason object (``stop`` has no matched token here: no real EOS)."""
    if reason == "length":
        return {"type": "length", "length": length}
    return {"type": "stop", "matched": None}


def generate_object(
    env: Envelope,
    text: str,
    output_ids: list[int],
    usage: Usage,
    finish: dict[str, Any] | None,
    e2e_latency: float | None = None,
) -> dict[str, Any]:
    """One ``/generate`` answer object: cumulative text and ids, and ``meta_info``."""
    meta: dict[str, Any] = {
        "id": env.request_id,
        "finish_reason": finish,
        "prompt_tokens": usage.prompt_tokens,
        "weight_version": "default",
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
    }
    if e2e_latency is not None:
        meta["e2e_latency"] = e2e_latency
    return {"text": text, "output_ids": output_ids, "meta_info": meta}


def server_info(
    *,
    model: str,
    tokenizer: str | None,
    max_model_len: int,
    max_running: int,
    page_size: int,
    seed: int,
    running: int,
    waiting: int,
    version: str,
) -> dict[str, Any]:
    """``GET /server_info``: the launch arguments SGLang reports, plus live scheduler state."""
    return {
        "model_path": model,
        "tokenizer_path": tokenizer,
        "served_model_name": model,
        "context_length": max_model_len,
        "max_running_requests": max_running,
        "page_size": page_size,
        "random_seed": seed,
        "internal_states": [
            {"num_running_reqs": running, "num_waiting_reqs": waiting, "last_gen_throughput": None}
        ],
        "version": version,
    }


def model_info(model: str, tokenizer: str | None) -> dict[str, Any]:
    """``GET /model_info`` (and the older ``/get_model_info``)."""
    return {
        "model_path": model,
        "served_model_name": model,
        "tokenizer_path": tokenizer,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": None,
        "architectures": None,
    }

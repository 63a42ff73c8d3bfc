"""llama.cpp's RAM prompt cache: find out, from the server's own answers, whether it is on.

Erasing every slot empties llama-server's KV cache, but not its RAM prompt cache
(``--cache-ram``, 8192 MiB by default), which keeps the prompts of slots it switched away
from and serves them back as cached tokens. No endpoint clears it and /props does not say
its size, so before a cold-start case the client asks the server: it sends one more
distinct prompt than there are slots (one slot then gives its prompt up to the RAM cache),
erases every slot, and sends the same prompts again. A prompt that then comes back with
most of its tokens cached came from the RAM cache. The probe ends by erasing every slot.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import httpx

from inferlab_bench.case import reset
from inferlab_bench.errors import PrefixCacheResetError

FLAG_HINT = "start llama-server with --cache-ram 0 (its RAM prompt cache cannot be cleared)"
PROBE_WORDS = 48


@dataclass(frozen=True)
class PromptCacheProbe:
    """What the probe saw: per prompt, tokens sent and tokens the server read from cache."""

    slots: int
    prompt_tokens: tuple[int, ...]
    cached_tokens: tuple[int, ...]

    @property
    def ram_cache_on(self) -> bool:
        return any(c * 2 > p for p, c in zip(self.prompt_tokens, self.cached_tokens, strict=True))

    def as_json(self) -> dict[str, object]:
        return {
            "schema_version": 1,
            "slots": self.slots,
            "prompt_tokens": list(self.prompt_tokens),
            "cached_tokens_after_erase": list(self.cached_tokens),
            "ram_prompt_cache_on": self.ram_cache_on,
        }


def refuse_if_on(probe: PromptCacheProbe) -> None:
    """PrefixCacheResetError naming ``--cache-ram 0`` when the RAM prompt cache is on."""
    if probe.ram_cache_on:
        raise PrefixCacheResetError(
            "llama-server keeps a RAM prompt cache that survives the slot erase: after every "
            f"slot was erased it served cached prompt tokens {list(probe.cached_tokens)} for "
            f"prompts of {list(probe.prompt_tokens)} tokens, so no measured phase starts cold",
            hint=FLAG_HINT,
        )


def probe_prompt_cache(
    base_url: str, model: str, chat_path: str, target: reset.ResetTarget, timeout: float
) -> PromptCacheProbe:
    slots = _slot_count(base_url, timeout)
    prompts = [_nonce_prompt() for _ in range(slots + 1)]
    with httpx.Client(base_url=base_url, timeout=timeout) as client:
        _erase(base_url, target, timeout)
        for prompt in prompts:
            _ask(client, chat_path, model, prompt)
        _erase(base_url, target, timeout)
        seen = [_ask(client, chat_path, model, prompt) for prompt in prompts]
    _erase(base_url, target, timeout)
    return PromptCacheProbe(
        slots=slots,
        prompt_tokens=tuple(p for p, _ in seen),
        cached_tokens=tuple(c for _, c in seen),
    )


def _slot_count(base_url: str, timeout: float) -> int:
    try:
        props = httpx.get(base_url.rstrip("/") + "/props", timeout=timeout).json()
    except (httpx.HTTPError, ValueError) as exc:
        raise PrefixCacheResetError(f"GET {base_url}/props: {exc}") from exc
    slots = props.get("total_slots") if isinstance(props, dict) else None
    return slots if isinstance(slots, int) and slots > 0 else 1


def _nonce_prompt() -> str:
    # Distinct from the first word: no two probe prompts share more than the template prefix.
    return " ".join(secrets.token_hex(3) for _ in range(PROBE_WORDS))


def _ask(client: httpx.Client, chat_path: str, model: str, prompt: str) -> tuple[int, int]:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 1}
    try:
        response = client.post(chat_path, json=body)
        usage = response.json().get("usage") or {}
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise PrefixCacheResetError(f"prompt-cache probe {chat_path}: {exc}") from exc
    if response.status_code != 200:
        raise PrefixCacheResetError(
            f"prompt-cache probe {chat_path}: HTTP {response.status_code} {response.text[:200]}"
        )
    details = usage.get("prompt_tokens_details") or {}
    return int(usage.get("prompt_tokens", 0)), int(details.get("cached_tokens", 0) or 0)


def _erase(base_url: str, target: reset.ResetTarget, timeout: float) -> None:
    for call in reset.reset_all(base_url, target, timeout):
        reset.raise_unless_ok(call)

"""What a server says it is: the ``owned_by`` of its GET /v1/models (vllm, sglang, llamacpp)."""

from __future__ import annotations


def models_owner(base_url: str, timeout: float = 5.0) -> str | None:
    """The one ``owned_by`` all listed models share; None when absent, mixed or unreachable."""
    import httpx  # here, not at the top: every command's flags import this module

    try:
        response = httpx.get(base_url.rstrip("/") + "/v1/models", timeout=timeout)
        cards = response.json().get("data") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    owners = {card.get("owned_by") for card in cards or [] if isinstance(card, dict)}
    owner = owners.pop() if len(owners) == 1 else None
    return owner if isinstance(owner, str) else None

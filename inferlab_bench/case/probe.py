"""A cheap look at the server before AIPerf starts: is anything listening at the endpoint?"""

from __future__ import annotations

import httpx

from inferlab_bench.errors import ServerError


def check_listening(base_url: str, timeout: float = 5.0) -> None:
    """ServerError when nothing accepts connections at ``base_url`` (any HTTP answer is fine)."""
    try:
        httpx.get(base_url.rstrip("/") + "/v1/models", timeout=timeout)
    except httpx.ConnectError as exc:
        raise ServerError(
            f"endpoint {base_url}: nothing is listening ({exc})",
            hint="start the inference server or fix endpoint.host/port; no load was sent",
        ) from exc
    except httpx.HTTPError as exc:
        raise ServerError(
            f"endpoint {base_url}: no HTTP answer ({type(exc).__name__}: {exc})"
        ) from exc

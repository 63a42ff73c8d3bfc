"""A cheap look at the server before AIPerf starts: is anything listening, serving the model?"""

from __future__ import annotations

import httpx

from inferlab_bench.errors import ServerError

SIMULATOR_HEADER = "x-inferlab-simulator"
"""The header our simulator's /v1/models answer carries (``simulator.app.SIMULATOR_HEADER``)."""


def check_listening(
    base_url: str, timeout: float = 5.0, served_name: str | None = None
) -> str | None:
    """ServerError when nothing accepts connections at ``base_url`` (any HTTP answer is fine),
    or when its ``/v1/models`` lists models and ``served_name`` is not among them.

    Returns the simulator's version when the server announced itself as inferlab-bench's
    simulator (``SIMULATOR_HEADER``), else None: only then may the case ask it for the truth.
    """
    try:
        answer = httpx.get(base_url.rstrip("/") + "/v1/models", timeout=timeout)
    except httpx.ConnectError as exc:
        raise ServerError(
            f"endpoint {base_url}: nothing is listening ({exc})",
            hint="start the inference server or fix endpoint.host/port; no load was sent",
        ) from exc
    except httpx.HTTPError as exc:
        raise ServerError(
            f"endpoint {base_url}: no HTTP answer ({type(exc).__name__}: {exc})"
        ) from exc
    served = _served_models(answer)
    if served_name is not None and served and served_name not in served:
        shown = ", ".join(repr(name) for name in served[:10])
        more = f" and {len(served) - 10} more" if len(served) > 10 else ""
        raise ServerError(
            f"endpoint {base_url}: model {served_name!r} is not served here; "
            f"its /v1/models lists {shown}{more}",
            hint="name one of the served models (model.served_name); no load was sent",
        )
    return answer.headers.get(SIMULATOR_HEADER) if answer.status_code == 200 else None


def _served_models(answer: httpx.Response) -> list[str]:
    """The model ids an OpenAI-style ``/v1/models`` lists; empty when it lists none or is not
    that document (a server without the route is not judged by it)."""
    if answer.status_code != 200:
        return []
    try:
        data = answer.json().get("data")
    except (ValueError, AttributeError):
        return []
    if not isinstance(data, list):
        return []
    return [str(m["id"]) for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]

"""The ground truth of a case's own requests, from our simulator, asked only when it announced
itself.

A real server is never asked: the case stage calls ``fetch`` only when the server's
``GET /v1/models`` answer carried the simulator's header (``probe.SIMULATOR_HEADER``). The
simulator then answers ``POST /inferlab/ground-truth`` with its records of the X-Request-IDs
asked (what it measured: arrival, first and last token writes, end, cached tokens). Those
records are the truth the validity verdicts are decided by (``validity.measured``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TRUTH_PATH = "/inferlab/ground-truth"
"""The simulator's path (``simulator.app.TRUTH_PATH``)."""
BATCH = 5000
"""Ids per call: 5000 UUIDs are ~200 kB, within the simulator's 1 MB body bound."""


def fetch(base_url: str, ids: Sequence[str], timeout: float = 10.0) -> list[dict[str, Any]] | str:
    """The simulator's request records of ``ids``, or a sentence saying why there are none."""
    import httpx  # here, not at the top: the case stage's import stays light

    url = base_url.rstrip("/") + TRUTH_PATH
    found: list[dict[str, Any]] = []
    try:
        for lo in range(0, len(ids), BATCH):
            answer = httpx.post(
                url, json={"x_request_ids": list(ids[lo : lo + BATCH])}, timeout=timeout
            )
            if answer.status_code != 200:
                return f"POST {url} answered {answer.status_code}"
            records = answer.json().get("records")
            if not isinstance(records, list):
                return f"POST {url}: no records list in the answer"
            found += [r for r in records if isinstance(r, dict)]
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return f"POST {url} failed ({type(exc).__name__}: {exc})"
    return found

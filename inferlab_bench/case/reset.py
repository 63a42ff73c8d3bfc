"""Prefix-cache reset over HTTP (httpx): which call a framework needs, making it, recording it."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.case.identity import models_owner
from inferlab_bench.errors import ConfigurationError, PrefixCacheResetError

if TYPE_CHECKING:  # httpx is imported by the calls: every command's flags import this module
    import httpx

SLOT = "{id}"
"""In a reset path: make the call once per slot listed by GET /slots (llama.cpp)."""
FRAMEWORK_RESETS: dict[str, tuple[str, str] | None] = {
    "vllm": ("POST", "/reset_prefix_cache"),
    "sglang": ("POST", "/flush_cache"),
    "tokenspeed": ("POST", "/flush_cache"),
    # llama-server keeps one prompt per slot: erase every slot (no --slot-save-path needed).
    "llamacpp": ("POST", f"/slots/{SLOT}?action=erase"),
    "trtllm": None,
    "none": None,
}
OPTION_HELP = "vllm|sglang|tokenspeed|llamacpp|none|METHOD:/path"
_METHODS = ("POST", "GET", "PUT", "DELETE")
# Only a server's own name for itself in GET /v1/models is trusted to pick the call.
_OWNED_BY = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llamacpp"}
SLOTS_PATH = "/slots"
DEFAULT_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class ResetTarget:
    """The reset call to make, and where the choice came from."""

    method: str
    path: str
    origin: str
    """``--prefix-cache-reset vllm``, ``detected from GET /v1/models`` ..."""

    @property
    def per_slot(self) -> bool:
        """The call is made once per slot of GET /slots (llama.cpp's slot erase)."""
        return SLOT in self.path


@dataclass(frozen=True)
class ResetCall:
    """Evidence of one reset call."""

    url: str
    method: str
    status: int | None
    time_ns: int
    duration: float
    ok: bool
    error: str | None = None


def parse_reset_option(text: str) -> ResetTarget | None:
    """``vllm`` / ``METHOD:/path`` -> a target; ``none`` / ``trtllm`` -> None (no reset exists)."""
    value = text.strip()
    key = value.lower()
    if key in FRAMEWORK_RESETS:
        call = FRAMEWORK_RESETS[key]
        return (
            None if call is None else ResetTarget(call[0], call[1], f"--prefix-cache-reset {key}")
        )
    method, sep, path = value.partition(":")
    if not sep or method.upper() not in _METHODS or not path.startswith("/"):
        raise ConfigurationError(
            f"--prefix-cache-reset: expected {OPTION_HELP}, found {text!r}",
            hint="e.g. --prefix-cache-reset vllm or --prefix-cache-reset POST:/reset_prefix_cache",
        )
    return ResetTarget(method.upper(), path, f"--prefix-cache-reset {value}")


def is_success(status: int) -> bool:
    """2xx except 206 (a partial answer is not a completed reset)."""
    return 200 <= status < 300 and status != 206


def detect_target(base_url: str, timeout: float = 5.0) -> ResetTarget:
    """Pick the reset call from what the server says about itself, or ask for the option."""
    owner = models_owner(base_url, timeout)
    framework = _OWNED_BY.get(owner or "")
    if framework is None:
        raise PrefixCacheResetError(
            "definition.reset_prefix_cache is true but the server's framework is unknown "
            f"(GET {base_url}/v1/models owned_by: {owner!r})",
            hint=f"pass --prefix-cache-reset {OPTION_HELP} (or INFERLAB_PREFIX_CACHE_RESET)",
        )
    method, path = FRAMEWORK_RESETS[framework] or ("", "")
    return ResetTarget(method, path, f"detected from GET /v1/models owned_by {owner!r}")


def reset_prefix_cache(
    base_url: str, target: ResetTarget, timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> ResetCall:
    """Make the reset call once; the evidence records failures instead of raising."""
    import httpx

    url = base_url.rstrip("/") + target.path
    started, clock = time.time_ns(), time.perf_counter()
    try:
        with httpx.Client(timeout=timeout) as client:
            response = client.request(target.method, url)
    except httpx.HTTPError as exc:
        return _failed_call(url, target, started, clock, exc)
    return _answered_call(url, target, started, clock, response)


async def reset_prefix_cache_async(
    base_url: str, target: ResetTarget, timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> ResetCall:
    """``reset_prefix_cache`` for code running inside an event loop (the AIPerf plugin)."""
    import httpx

    url = base_url.rstrip("/") + target.path
    started, clock = time.time_ns(), time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.request(target.method, url)
    except httpx.HTTPError as exc:
        return _failed_call(url, target, started, clock, exc)
    return _answered_call(url, target, started, clock, response)


def reset_all(
    base_url: str, target: ResetTarget, timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> list[ResetCall]:
    """The whole reset: one call, or (per-slot targets) GET /slots then one call per slot."""
    import httpx

    if not target.per_slot:
        return [reset_prefix_cache(base_url, target, timeout)]
    listing_target = ResetTarget("GET", SLOTS_PATH, target.origin)
    url = base_url.rstrip("/") + SLOTS_PATH
    started, clock = time.time_ns(), time.perf_counter()
    try:
        with httpx.Client(timeout=timeout) as client:
            response = client.get(url)
    except httpx.HTTPError as exc:
        return [_failed_call(url, listing_target, started, clock, exc)]
    listing = _answered_call(url, listing_target, started, clock, response)
    ids = _slot_ids(response) if listing.ok else []
    calls = [listing if ids or not listing.ok else _no_slots(listing)]
    return calls + [reset_prefix_cache(base_url, _for_slot(target, i), timeout) for i in ids]


async def reset_all_async(
    base_url: str, target: ResetTarget, timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> list[ResetCall]:
    """``reset_all`` for code running inside an event loop (the AIPerf plugin)."""
    import httpx

    if not target.per_slot:
        return [await reset_prefix_cache_async(base_url, target, timeout)]
    listing_target = ResetTarget("GET", SLOTS_PATH, target.origin)
    url = base_url.rstrip("/") + SLOTS_PATH
    started, clock = time.time_ns(), time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.get(url)
    except httpx.HTTPError as exc:
        return [_failed_call(url, listing_target, started, clock, exc)]
    listing = _answered_call(url, listing_target, started, clock, response)
    ids = _slot_ids(response) if listing.ok else []
    calls = [listing if ids or not listing.ok else _no_slots(listing)]
    for i in ids:
        calls.append(await reset_prefix_cache_async(base_url, _for_slot(target, i), timeout))
    return calls


def _slot_ids(response: httpx.Response) -> list[int]:
    try:
        slots = response.json()
    except ValueError:
        return []
    if not isinstance(slots, list):
        return []
    return [s["id"] for s in slots if isinstance(s, dict) and isinstance(s.get("id"), int)]


def _no_slots(listing: ResetCall) -> ResetCall:
    # Nothing to erase is not a reset: the server hides its slots (--no-slots) or has none.
    return ResetCall(**{**asdict(listing), "ok": False, "error": "GET /slots listed no slot"})


def _for_slot(target: ResetTarget, slot: int) -> ResetTarget:
    return ResetTarget(target.method, target.path.replace(SLOT, str(slot)), target.origin)


def raise_unless_ok(call: ResetCall) -> None:
    """PrefixCacheResetError naming the URL and what came back."""
    if call.ok:
        return
    if call.status is None:
        found = call.error
    else:
        found = f"HTTP {call.status}" + (f": {call.error}" if call.error else "")
    raise PrefixCacheResetError(
        f"prefix-cache reset {call.method} {call.url} failed: {found}",
        hint="check --prefix-cache-reset against the server's framework; no load was measured",
    )


def write_evidence(
    path: Path, target: ResetTarget | None, calls: list[ResetCall], when: str
) -> None:
    """The raw artifact: every call with url, method, status, time_ns and duration."""
    document: dict[str, Any] = {
        "schema_version": 1,
        "when": when,
        "target": None if target is None else asdict(target),
        "calls": [asdict(call) for call in calls],
    }
    write_bytes_atomic(path, orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")


def read_evidence(path: Path) -> list[ResetCall]:
    """The calls recorded by ``write_evidence`` (empty when the file is absent)."""
    try:
        document = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return []
    except (OSError, orjson.JSONDecodeError) as exc:
        raise PrefixCacheResetError(f"{path}: reset evidence unreadable ({exc})") from exc
    return [ResetCall(**call) for call in document.get("calls", [])]


def _answered_call(
    url: str, target: ResetTarget, started: int, clock: float, response: httpx.Response
) -> ResetCall:
    ok = is_success(response.status_code)
    return ResetCall(
        url=url,
        method=target.method,
        status=response.status_code,
        time_ns=started,
        duration=time.perf_counter() - clock,
        ok=ok,
        # What the server said it needs (llama.cpp: "Start it with `--slot-save-path`").
        error=None if ok else _said(response),
    )


def _said(response: httpx.Response, limit: int = 300) -> str | None:
    import httpx

    try:
        text = response.text.strip()
    except (httpx.HTTPError, UnicodeDecodeError):
        return None
    return text[:limit] or None


def _failed_call(
    url: str, target: ResetTarget, started: int, clock: float, exc: Exception
) -> ResetCall:
    return ResetCall(
        url=url,
        method=target.method,
        status=None,
        time_ns=started,
        duration=time.perf_counter() - clock,
        ok=False,
        error=f"{type(exc).__name__}: {exc}",
    )

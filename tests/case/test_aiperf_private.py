"""Every private part of AIPerf our plugin touches, checked on the installed AIPerf by name.

Our strategy and transport subclass AIPerf's and reach into attributes and methods AIPerf
does not promise to keep (``case/aiperf_plugin/strategy.py``, ``transport.py``,
``schedule.py``). An upgrade that renames or drops one fails here, naming it, before a run
fails mid-load. The lists are the whole of what the plugin touches: add to them with it.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
from aiperf.common.models import AioHttpTraceData, RequestRecord
from aiperf.credit import callback_handler
from aiperf.credit.issuer import CreditIssuer
from aiperf.timing import config as timing_config
from aiperf.timing.config import CreditPhaseConfig
from aiperf.timing.phase.lifecycle import PhaseLifecycle
from aiperf.timing.phase.stop_conditions import StopConditionChecker
from aiperf.timing.strategies.request_rate import RequestRateStrategy
from aiperf.transports.aiohttp_client import AioHttpClient
from aiperf.transports.aiohttp_transport import AioHttpTransport

# (class, name): an attribute its __init__ (or a base's) assigns as ``self.<name>``.
ASSIGNED = [
    (RequestRateStrategy, "_config"),
    (RequestRateStrategy, "_continuation_turns"),  # replaced by our waking queue
    (RequestRateStrategy, "_rate_update_event"),
    (RequestRateStrategy, "_credit_issuer"),
    (RequestRateStrategy, "_stop_checker"),
    (RequestRateStrategy, "_rate_generator"),  # wrapped by schedule.IntervalRecorder
    (RequestRateStrategy, "_lifecycle"),
    (PhaseLifecycle, "started_at_ns"),
    (AioHttpTransport, "aiohttp_client"),
    (AioHttpClient, "tcp_connector"),
]
# (class, method, parameters it must take, in order after self).
METHODS = [
    (RequestRateStrategy, "_wait_until_next_target", ("next_target_perf", "now")),
    (RequestRateStrategy, "setup_phase", ()),
    (RequestRateStrategy, "execute_phase", ()),
    (RequestRateStrategy, "notice", None),
    (CreditIssuer, "can_acquire_and_start_new_session", ()),
    (StopConditionChecker, "can_send_any_turn", ()),
    (AioHttpTransport, "send_request", ("request_info", "payload", "first_token_callback")),
    (AioHttpTransport, "notice", None),
]
# (pydantic model, field) read or written on AIPerf's records and phase config.
FIELDS = [
    (CreditPhaseConfig, "phase"),
    (CreditPhaseConfig, "arrival_pattern"),
    (CreditPhaseConfig, "concurrency_ramp_duration_sec"),
    (CreditPhaseConfig, "prefill_concurrency"),
    (RequestRecord, "start_perf_ns"),
    (RequestRecord, "timestamp_ns"),
    (RequestRecord, "error"),
    (RequestRecord, "trace_data"),
    (AioHttpTraceData, "request_send_end_perf_ns"),
    (AioHttpTraceData, "request_chunks_count"),
]
# (module, text): behaviour of AIPerf's we rely on, where it lives.
RELIED_ON = [
    # It calls a strategy's observe_credit_return after releasing the credit's slots: the
    # wake-up of our credit-waiting loop.
    (callback_handler, 'getattr(handler.strategy, "observe_credit_return", None)'),
    # Warmup always runs AIPerf's own request_rate: our config names no warmup strategy.
    (timing_config, "timing_mode=TimingMode.REQUEST_RATE"),
]


def _id(item: tuple[Any, ...]) -> str:
    owner = item[0]
    return f"{getattr(owner, '__name__', owner)}.{item[1][:40]}"


@pytest.mark.parametrize("item", ASSIGNED, ids=_id)
def test_each_attribute_we_touch_is_still_assigned(item: tuple[type, str]) -> None:
    cls, name = item
    pattern = re.compile(rf"self\.{re.escape(name)}\s*(:[^=\n]*)?=[^=]")
    sources = [inspect.getsource(base) for base in cls.__mro__ if base.__module__[:6] == "aiperf"]
    assert any(pattern.search(text) for text in sources), f"{cls.__name__}.{name} is gone"


@pytest.mark.parametrize("item", METHODS, ids=_id)
def test_each_method_we_call_or_override_is_still_there(
    item: tuple[type, str, tuple[str, ...] | None],
) -> None:
    cls, name, parameters = item
    method = getattr(cls, name, None)
    assert callable(method), f"{cls.__name__}.{name} is gone"
    if parameters is not None:
        found = tuple(p for p in inspect.signature(method).parameters if p != "self")
        assert found == parameters, f"{cls.__name__}.{name} now takes {found}"


@pytest.mark.parametrize("item", FIELDS, ids=_id)
def test_each_field_we_read_or_move_is_still_a_field(item: tuple[Any, str]) -> None:
    model, name = item
    assert name in model.model_fields, f"{model.__name__}.{name} is gone"


@pytest.mark.parametrize("item", RELIED_ON, ids=_id)
def test_the_behaviour_we_rely_on_is_still_in_aiperf(item: tuple[Any, str]) -> None:
    module, text = item
    assert text in inspect.getsource(module), f"{module.__name__} no longer has {text!r}"


def test_the_lists_cover_every_private_name_the_plugin_uses() -> None:
    """A private AIPerf name the plugin reaches for must be listed above."""
    from inferlab_bench.case.aiperf_plugin import schedule, strategy, transport

    listed = {name for _, name in ASSIGNED} | {name for _, name, _ in METHODS}
    used: set[str] = set()
    for module in (strategy, transport, schedule):
        used |= set(re.findall(r"self\.(_[a-z]\w*)", inspect.getsource(module)))
    ours = {"_credit_back", "_woken", "_waits_for_credits", "_generator", "_blocked"}
    ours |= {"_sleep_until_credit_back", "_reset", "_report_wire_start", "_preconnect"}
    assert used - ours <= listed, f"not listed: {sorted(used - ours - listed)}"

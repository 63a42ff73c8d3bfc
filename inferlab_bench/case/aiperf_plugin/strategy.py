"""Timing strategies for AIPerf: wait for a credit instead of spinning; reset the prefix
cache between warmup and profiling; record when each profiling request was due."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from aiperf.common.enums import CreditPhase
from aiperf.plugin.enums import ArrivalPattern
from aiperf.timing.strategies.request_rate import RequestRateStrategy

from inferlab_bench.case.aiperf_plugin.hook import ENV_VAR, HookSettings
from inferlab_bench.case.aiperf_plugin.schedule import IntervalRecorder, write_schedule
from inferlab_bench.case.reset import raise_unless_ok, reset_all_async, write_evidence
from inferlab_bench.case.server_metrics import scrape_async, write_scrape

RECHECK_SECONDS = 1.0
"""Longest sleep without a wake-up: a safety net only, every slot is freed by a return."""


class _WakingQueue(asyncio.Queue[Any]):
    """AIPerf's continuation-turn queue, setting ``woken`` whenever a turn is queued."""

    def __init__(self, woken: asyncio.Event) -> None:
        super().__init__()
        self._woken = woken

    def put_nowait(self, item: Any) -> None:
        super().put_nowait(item)
        self._woken.set()


class CreditWaitStrategy(RequestRateStrategy):  # type: ignore[misc]
    """AIPerf's request_rate strategy that sleeps until a credit returns when it cannot send.

    In concurrency mode the arrival interval is zero, so AIPerf's loop, finding every slot
    taken, only yields to the event loop and tries again: the timing manager holds most of
    a core for the whole run. Here the loop instead sleeps until something can change its
    answer: a credit coming back (its slot freed; AIPerf calls ``observe_credit_return``
    after the release, on every return) or a continuation turn being queued.

    The wait is taken only where those are the only ways a slot frees: a concurrency-burst
    phase without a concurrency ramp and without a prefill limit (both free capacity
    without a return). Anything else keeps AIPerf's own loop unchanged. AIPerf runs it for
    a phase whose config names it (``timingMode: inferlab_credit_wait``).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._credit_back = asyncio.Event()
        self._continuation_turns = _WakingQueue(self._credit_back)
        config = self._config
        self._waits_for_credits = (
            config.arrival_pattern == ArrivalPattern.CONCURRENCY_BURST
            and not config.concurrency_ramp_duration_sec
            and config.prefill_concurrency is None
        )
        self.loop_passes = 0
        self.credit_waits = 0

    async def execute_phase(self) -> None:
        try:
            await super().execute_phase()
        finally:
            if self._waits_for_credits:  # the evidence a test reads in AIPerf's log
                self.notice(
                    f"inferlab: {self._config.phase} issuing loop: {self.loop_passes} passes, "
                    f"{self.credit_waits} waits for a credit"
                )

    def observe_credit_return(self, credit: Any) -> None:
        """Every returned credit, after its slots were released: wake the issuing loop."""
        self._credit_back.set()

    async def _wait_until_next_target(self, next_target_perf: float, now: float) -> bool:
        self.loop_passes += 1
        if self._waits_for_credits and not self._rate_update_event.is_set():
            self._credit_back.clear()
            if self._blocked():
                self.credit_waits += 1
                await self._sleep_until_credit_back()
                return False
        result: bool = await super()._wait_until_next_target(next_target_perf, now)
        return result

    def _blocked(self) -> bool:
        """True when the loop's next pass could neither issue a turn nor finish."""
        return (
            self._continuation_turns.empty()
            and not self._credit_issuer.can_acquire_and_start_new_session()
            and self._stop_checker.can_send_any_turn()
        )

    async def _sleep_until_credit_back(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._credit_back.wait(), timeout=RECHECK_SECONDS)


class ResetAfterWarmupStrategy(CreditWaitStrategy):
    """The credit-waiting strategy with one prefix-cache reset in the profiling phase's setup.

    AIPerf runs phases one after the other (profiling is not ``seamless``): the warmup
    runner returns only once every warmup credit has come back, and ``setup_phase`` of
    the next phase runs before its first credit is issued. That is the barrier.

    In the profiling phase of a rate load it also keeps every interval the rate loop draws
    (``schedule.IntervalRecorder``) and writes them when the phase ends: the plan that the
    latency from the scheduled send is measured against.
    """

    async def setup_phase(self) -> None:
        await super().setup_phase()
        if self._config.phase != CreditPhase.PROFILING:
            return
        settings = HookSettings.from_env(os.environ[ENV_VAR])
        if settings.target is not None:
            await self._reset(settings)

    async def _reset(self, settings: HookSettings) -> None:
        assert settings.target is not None
        calls = await reset_all_async(settings.base_url, settings.target, settings.timeout)
        write_evidence(settings.evidence_path, settings.target, calls, when="after-warmup")
        for call in calls:
            self.notice(f"inferlab: prefix-cache reset {call.method} {call.url} -> {call.status}")
            raise_unless_ok(call)
        if settings.metrics_path is not None:
            found = await scrape_async(settings.base_url, min(5.0, settings.timeout))
            write_scrape(settings.metrics_path, found)

    async def execute_phase(self) -> None:
        path = None
        if self._config.phase == CreditPhase.PROFILING:
            path = HookSettings.from_env(os.environ[ENV_VAR]).schedule_path
        if path is None:
            await super().execute_phase()
            return
        recorder = IntervalRecorder(self._rate_generator)  # type: ignore[has-type]
        self._rate_generator = recorder
        try:
            await super().execute_phase()
        finally:
            started = self._lifecycle.started_at_ns
            if started is not None:
                write_schedule(path, started, recorder.intervals)

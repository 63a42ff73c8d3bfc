"""A timing strategy for AIPerf: reset the prefix cache between warmup and profiling, and
record when each profiling request was due."""

from __future__ import annotations

import os

from aiperf.common.enums import CreditPhase
from aiperf.timing.strategies.request_rate import RequestRateStrategy

from inferlab_bench.case.aiperf_plugin.hook import ENV_VAR, HookSettings
from inferlab_bench.case.aiperf_plugin.schedule import IntervalRecorder, write_schedule
from inferlab_bench.case.reset import raise_unless_ok, reset_all_async, write_evidence
from inferlab_bench.case.server_metrics import scrape_async, write_scrape


class ResetAfterWarmupStrategy(RequestRateStrategy):  # type: ignore[misc]
    """AIPerf's request_rate strategy with one reset in the profiling phase's setup.

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

"""Signals and the hard deadline become our errors wherever the stage is; deferred code polls."""

from __future__ import annotations

import os
import signal
import time

import pytest

from inferlab_bench import interrupts
from inferlab_bench.errors import DeadlineExceededError, InterruptedStageError


def test_a_signal_raises_where_the_stage_is() -> None:
    with (
        pytest.raises(InterruptedStageError, match=r"case interrupted by a signal \(SIGTERM\)"),
        interrupts.guard("case") as guard,
    ):
        guard.doing = "resetting the prefix cache"
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # interrupted at once
    assert guard.reason == "SIGTERM"


def test_sigint_is_no_keyboard_interrupt() -> None:
    with pytest.raises(InterruptedStageError, match="SIGINT"), interrupts.guard("preparation"):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)


def test_the_deadline_raises_naming_the_budget_and_the_phase() -> None:
    started = time.monotonic()
    with (
        pytest.raises(
            DeadlineExceededError, match=r"case_budget_seconds 0.3 ran out while waiting"
        ),
        interrupts.guard("case", 0.3, budget_field="case_budget_seconds") as guard,
    ):
        guard.doing = "waiting"
        time.sleep(5)
    assert time.monotonic() - started < 1.0


def test_deferred_code_only_sees_the_event_and_a_second_signal_never_raises() -> None:
    with interrupts.guard("case") as guard:
        with guard.deferred() as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop.wait(2.0)
        assert guard.reason == "SIGTERM"
        os.kill(os.getpid(), signal.SIGTERM)  # while the failed result is written
        time.sleep(0.05)
        assert isinstance(guard.error(), InterruptedStageError)


def test_guards_nest_and_restore_the_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.guard("command") as outer:
        with (
            pytest.raises(DeadlineExceededError),
            interrupts.guard("case", 0.2, budget_field="case_budget_seconds"),
        ):
            time.sleep(5)
        assert outer.reason is None  # the inner deadline stopped only the inner guard
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0.0
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_forked_child_gets_the_default_action_not_the_stages_error() -> None:
    # A pool worker forked inside a stage inherits the handlers; Pool.terminate's SIGTERM
    # must end it, not raise the stage's error inside it (which hung the pool's teardown).
    with interrupts.guard("preparation"):
        pid = os.fork()
        if pid == 0:  # the child waits to be terminated
            time.sleep(30)
            os._exit(0)
        time.sleep(0.2)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM


def test_a_budget_beyond_the_timer_is_clamped_not_an_overflow() -> None:
    # The protocol takes any finite positive budget; setitimer overflowed at 1e10 s.
    for budget in (1e308, 1e10):
        with interrupts.guard("case", budget, budget_field="case_budget_seconds") as guard:
            left = guard.remaining()
            assert interrupts.MAX_BUDGET_SECONDS - 5 < left <= interrupts.MAX_BUDGET_SECONDS
        assert guard.budget == budget  # messages still say what the user gave


def test_the_aiperf_timeout_of_a_huge_budget_is_the_clamped_one() -> None:
    from inferlab_bench.case.stage import planned_config
    from tests.kube import configs

    request = configs.request({"kind": "concurrency_limited", "concurrency": 1})
    huge = request.model_copy(update={"case_budget_seconds": 1e308})
    timeout = planned_config(huge)["benchmark"]["endpoint"]["timeout"]
    assert timeout < interrupts.MAX_BUDGET_SECONDS

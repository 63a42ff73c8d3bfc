"""AIPerf stopping before warmup ends is reported with its own reason, not as a missing reset."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferlab_bench.case import runner, stage
from inferlab_bench.case.stage import CaseOptions
from inferlab_bench.errors import LoadGeneratorError, PrefixCacheResetError
from tests.case.support import make_request

REASON = (
    "23:56:50.396 ERROR    Error running Hook(...) hook for AioHttpTransport: "
    "keepalive_timeout cannot be set if force_close is True"
)


def outcome(log: Path, exit_code: int) -> runner.RunOutcome:
    return runner.RunOutcome(
        command=["aiperf"],
        exit_code=exit_code,
        timed_out=False,
        interrupted=False,
        duration=1.0,
        started_ns=0,
        log_path=log,
    )


def test_a_start_up_failure_names_aiperfs_reason(tmp_path: Path) -> None:
    request = make_request(port=9, artifact_dir=tmp_path / "case", warmup=2)
    case = stage._Case(request, CaseOptions(), deadline=1e18)
    log = tmp_path / "aiperf-output.log"
    log.write_text("starting\n" + REASON + "\n")
    with pytest.raises(LoadGeneratorError, match="keepalive_timeout cannot be set"):
        stage._check_outcome(case, outcome(log, 1), hooked=True)
    # AIPerf ran to the end and still no reset was recorded: that is the reset's failure.
    with pytest.raises(PrefixCacheResetError, match="never ran"):
        stage._check_outcome(case, outcome(log, 0), hooked=True)

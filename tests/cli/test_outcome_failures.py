"""A case whose requests failed: --strict refuses it and the lines say how many failed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inferlab_bench.cli.outcome import exit_code, validity_lines
from inferlab_bench.protocol import BenchClientResult, ClientStatus, ConcurrencyLimited
from inferlab_bench.report.rundir import SavedCase
from inferlab_bench.validity import CaseFacts, PhaseRecords, assess
from tests.validity.builders import closed_loop

DISCONNECTED = "ServerDisconnectedError('Server disconnected')"


def saved_case(tmp_path: Path) -> SavedCase:
    base = closed_loop(2, 8, latency_ms=100, gap_ms=1)
    fields = {name: getattr(base, name) for name in base.__dataclass_fields__}
    fields["succeeded"] = np.array([True, False, True, True, False, True, True, True])
    fields["error_class"] = (None, "transport", None, None, "transport", None, None, None)
    fields["error_message"] = (None, DISCONNECTED, None, None, DISCONNECTED, None, None, None)
    load = ConcurrencyLimited(kind="concurrency_limited", concurrency=2)
    doc = assess(PhaseRecords(**fields), None, CaseFacts(load=load))
    result = BenchClientResult(
        status=ClientStatus.SUCCEEDED, completed_requests=6, failed_requests=2
    )
    return SavedCase(tmp_path / "c2", result, None, doc.to_json_dict())


def test_strict_refuses_failed_requests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = saved_case(tmp_path)
    assert exit_code([case], strict=False) == 0
    assert exit_code([case], strict=True) != 0
    err = capsys.readouterr().err
    assert "--strict: validity verdict failed: c2: requests_succeeded" in err
    line, *sentences = validity_lines(case)
    assert "2 of 8 requests failed: transport 2" in line
    # Under the case's line, each failed verdict in one plain sentence.
    assert any(s.strip().startswith("2 of 8 requests failed") for s in sentences)
    detailed = validity_lines(case, detailed=True)
    assert detailed[0] == "validity: fail (2 of 8 requests failed: transport 2)"

"""``inferlab-bench dataset`` without an action lists its actions (it said one was required)."""

from __future__ import annotations

import pytest

from inferlab_bench.cli import main


def test_no_action_lists_the_actions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dataset"]) == 2
    err = capsys.readouterr().err
    for action in ("fetch", "verify", "path"):
        assert f"    {action} " in err, err
    assert "required" not in err


def test_an_unknown_action_names_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["dataset", "bogus"])
    assert stop.value.code == 2
    assert "choose from 'fetch', 'verify', 'path'" in capsys.readouterr().err

"""Writes that cannot hurt: devices, FIFOs, directories and links are never written through."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from inferlab_bench import atomic
from inferlab_bench.case import runner
from inferlab_bench.cli import main
from inferlab_bench.errors import OutputError
from inferlab_bench.interrupts import Guard
from tests.protocol import examples
from tests.reliability.targets import OUTPUT_KINDS, fingerprint, make_fifo, make_user_file


@pytest.mark.parametrize("stage", ["case", "prepare"])
@pytest.mark.parametrize("kind", sorted(OUTPUT_KINDS))
def test_output_path_of_each_kind(
    stage: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    maker, refused = OUTPUT_KINDS[kind]
    request = tmp_path / "request.json"
    request.write_text("{ not json")
    place = tmp_path / "place"
    place.mkdir()
    output = maker(place / "result.json")
    before = fingerprint(place)
    code = main([stage, "--input", str(request), "--output", str(output)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if refused:
        assert code == 1
        assert f"cannot write result {output}" in err and "only a regular file" in err
        assert fingerprint(place) == before
    else:
        assert code == 0, err
        assert json.loads(output.read_bytes())["status"] == "failed"
        after = fingerprint(place)
        target = "result.json.target"
        assert after.get(target) == before.get(target)  # a link's target is untouched
        assert sorted(after) == sorted(before)  # no temp files left


@pytest.mark.parametrize("kind", sorted(OUTPUT_KINDS))
def test_artifact_writes_refuse_what_is_not_a_regular_file(kind: str, tmp_path: Path) -> None:
    maker, refused = OUTPUT_KINDS[kind]
    target = maker(tmp_path / "population.jsonl")
    before = fingerprint(tmp_path)
    if refused:
        with pytest.raises(OutputError, match="population.jsonl: is .*only a regular file"):
            atomic.write_bytes_atomic(target, b"{}\n")
        assert fingerprint(tmp_path) == before
    else:
        atomic.write_bytes_atomic(target, b"{}\n")
        assert target.read_bytes() == b"{}\n" and not target.is_symlink()
        linked = tmp_path / "population.jsonl.target"
        assert fingerprint(tmp_path).get(linked.name) == before.get(linked.name)


def test_fresh_text_file_replaces_a_planted_link(tmp_path: Path) -> None:
    victim = make_user_file(tmp_path / "victim.txt")
    log = tmp_path / "aiperf-output.log"
    log.symlink_to(victim)
    with atomic.fresh_text_file(log) as handle:
        assert log.is_file() and not log.is_symlink()  # visible at once, for a live log
        handle.write("aiperf says hello\n")
    assert log.read_text() == "aiperf says hello\n"
    assert victim.read_text() == "the user's own file\n"


def test_fresh_text_file_refuses_a_fifo(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "aiperf-output.log")
    with pytest.raises(OutputError, match="is a FIFO"), atomic.fresh_text_file(fifo):
        pass
    assert fingerprint(tmp_path) == {"aiperf-output.log": fingerprint(tmp_path)[fifo.name]}


def test_aiperf_log_is_not_written_through_a_planted_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 6: ``artifact_dir/aiperf-output.log`` linked to a user file overwrote it."""
    victim = make_user_file(tmp_path / "victim.txt")
    log = tmp_path / "aiperf-output.log"
    log.symlink_to(victim)
    fake = [sys.executable, "-c", "print('fake aiperf ran')"]
    monkeypatch.setattr(runner, "aiperf_command", lambda config: fake)
    outcome = runner.run_aiperf(
        tmp_path / "config.json",
        log_path=log,
        guard=Guard("case", None),
        stop_at=float("inf"),
        env=dict(os.environ),
        echo=io.StringIO(),
    )
    assert outcome.exit_code == 0
    assert victim.read_text() == "the user's own file\n"
    assert log.read_text() == "fake aiperf ran\n" and not log.is_symlink()


@pytest.mark.parametrize("stage", ["case", "prepare"])
def test_empty_artifact_dir_is_refused_and_cwd_untouched(
    stage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Finding 2: ``"artifact_dir": ""`` wrote into the current directory."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    make_user_file(cwd / "population.jsonl")
    monkeypatch.chdir(cwd)
    data = (
        examples.prep_request()
        if stage == "prepare"
        else examples.case_request(examples.LOAD_SHAPES[0])
    )
    data["artifact_dir"] = ""
    request = tmp_path / "request.json"
    request.write_text(json.dumps(data))
    before = fingerprint(cwd)
    output = tmp_path / "result.json"
    assert main([stage, "--input", str(request), "--output", str(output)]) == 0
    result = json.loads(output.read_bytes())
    assert result["status"] == "failed"
    assert "artifact_dir: must not be empty" in result["error"]
    assert fingerprint(cwd) == before
    assert "Traceback" not in capsys.readouterr().err


def test_an_os_error_escaping_a_stage_names_the_file(tmp_path: Path) -> None:
    """Finding 8: not ``internal error: PermissionError``, but which file and why."""
    from inferlab_bench.cli.jsonmode import run_json_command
    from inferlab_bench.protocol import BenchClientRequest
    from tests.reliability.jsonmode import STAGES

    data = examples.case_request(examples.LOAD_SHAPES[0])
    population = make_user_file(tmp_path / "population.jsonl")
    data["population"]["path"], data["artifact_dir"] = str(population), str(tmp_path / "a")
    request = tmp_path / "request.json"
    request.write_text(json.dumps(data))

    def stage(request: BenchClientRequest) -> None:
        raise PermissionError(13, "Permission denied", "/somewhere/locked")

    output = tmp_path / "result.json"
    code = run_json_command(
        input_path=request,
        output_path=output,
        request_model=BenchClientRequest,
        stage=stage,  # type: ignore[arg-type]
        failed_result=STAGES["case"].failed_result,
        what="case",
    )
    assert code == 0
    error = json.loads(output.read_bytes())["error"]
    assert error.startswith("/somewhere/locked: cannot be used (permission denied)"), error


@pytest.mark.parametrize("kind", sorted(OUTPUT_KINDS))
def test_stale_outputs_are_removed_only_when_regular(kind: str, tmp_path: Path) -> None:
    from inferlab_bench.prepare.write import remove_stale

    maker, refused = OUTPUT_KINDS[kind]
    maker(tmp_path / "population.jsonl")
    before = fingerprint(tmp_path)
    if refused:
        with pytest.raises(OutputError, match="population.jsonl: is "):
            remove_stale(tmp_path)
        assert fingerprint(tmp_path) == before
    else:
        remove_stale(tmp_path)
        assert not (tmp_path / "population.jsonl").exists()
        linked = "population.jsonl.target"
        assert fingerprint(tmp_path).get(linked) == before.get(linked)


def test_a_request_built_in_process_can_be_checked_on_disk(tmp_path: Path) -> None:
    from inferlab_bench.errors import RequestError
    from inferlab_bench.protocol import BenchClientRequest, check_on_disk, parse_request

    data = examples.case_request(examples.LOAD_SHAPES[0])
    data["population"]["path"] = str(make_fifo(tmp_path / "population.jsonl"))
    data["artifact_dir"] = str(tmp_path / "a")
    request = parse_request(BenchClientRequest, json.dumps(data))  # shape only: fine
    with pytest.raises(RequestError, match="population.path: .* is a FIFO, expected a regular"):
        check_on_disk(request)
    data["population"]["path"] = str(make_user_file(tmp_path / "p.jsonl"))
    good = parse_request(BenchClientRequest, json.dumps(data))
    assert check_on_disk(good) == good


@pytest.mark.parametrize("kind", ["link-to-file", "fifo", "directory"])
def test_appended_logs_are_never_written_through_what_was_planted(
    tmp_path: Path, kind: str
) -> None:
    """The Kubernetes engine log and the simulator's ground truth append as they go: a link,
    FIFO or directory planted at their path is refused (a FIFO without blocking), the
    target left as it was."""
    victim = make_user_file(tmp_path / "victim.txt")
    target = tmp_path / "engine.log"
    if kind == "link-to-file":
        target.symlink_to(victim)
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    with pytest.raises(OutputError, match=str(target)):
        atomic.open_for_append(target)
    assert victim.read_text() == "the user's own file\n"


def test_appending_to_a_regular_file_keeps_what_was_there(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("first\n")
    with atomic.open_for_append(log) as handle:
        handle.write(b"second\n")
    assert log.read_text() == "first\nsecond\n"

"""The search loop's decisions with AIPerf's real planners and a scripted probe runner."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from inferlab_bench.capacity import CapacityRequest, Criterion, SearchSpec, Status, run_capacity
from inferlab_bench.capacity.spec import Axis, PlannerName
from inferlab_bench.case.stage import CaseOptions
from inferlab_bench.errors import InterruptedStageError
from tests.capacity.support import ScriptedServer, figures
from tests.case.support import make_request

SLO = {"ttft_ms": 200.0, "minimum_good_request_ratio": 0.5}


def request(tmp: Path, spec: SearchSpec) -> CapacityRequest:
    case = make_request(
        port=9,
        artifact_dir=tmp,
        source={"kind": "random", "input_tokens": 16, "output_tokens": 4},
        request_count=64,
        slo=SLO,
    )
    return CapacityRequest(case=case, search=spec)


def cliff(capacity: float) -> ScriptedServer:
    """100 ms up to ``capacity``, then every fourth request 400 ms (attainment 0.75)."""
    return ScriptedServer(lambda load, i: 100.0 if load <= capacity or i % 4 else 400.0)


def search(tmp: Path, server: ScriptedServer, **spec: object) -> object:
    fields: dict[str, object] = {
        "axis": Axis.CONCURRENCY,
        "low": 1,
        "high": 64,
        "criterion": Criterion(kind="attainment", value=0.95),
    }
    fields.update(spec)
    req = request(tmp, SearchSpec.model_validate(fields))
    return run_capacity(req, CaseOptions(), tmp, runner=server)


def test_an_invalid_probe_is_rerun_and_never_told_to_the_planner(tmp_path: Path) -> None:
    server = cliff(11)
    server.invalid = {8.0: 1}  # c=8 (a pass) is invalid once: its re-run counts
    outcome = search(tmp_path, server)
    probes = outcome.probes  # type: ignore[attr-defined]
    invalid = [p for p in probes if not p.judgement.valid]
    assert [p.load for p in invalid] == [8.0] and not invalid[0].counted
    rerun = probes[probes.index(invalid[0]) + 1]
    assert rerun.load == 8.0 and rerun.counted and rerun.judgement.slo_met
    counted = [p for p in probes if p.counted]
    assert [p.iteration for p in counted] == list(range(len(counted)))
    answer = outcome.answer  # type: ignore[attr-defined]
    assert answer.status is Status.FOUND
    assert (answer.capacity, answer.lowest_failing) == (11, 12)
    assert len({p.directory for p in probes}) == len(probes)
    assert invalid[0].directory.name == f"{invalid[0].number:02d}-c8"


def test_a_probe_invalid_twice_stops_the_search_without_a_capacity(tmp_path: Path) -> None:
    server = cliff(11)
    server.invalid = {8.0: 2}
    outcome = search(tmp_path, server)
    answer = outcome.answer  # type: ignore[attr-defined]
    assert answer.status is Status.CLIENT_LIMITED
    assert answer.capacity is None and answer.stopped_at_load == 8
    assert answer.highest_valid_pass == 4  # 1, 2, 4 passed before c=8
    assert [load for load, _ in server.seen] == [1, 2, 4, 8, 8]
    assert "--engine kube" in answer.message and "c=8" in answer.message


def test_no_rerun_stops_at_the_first_invalid_probe(tmp_path: Path) -> None:
    server = cliff(11)
    server.invalid = {1.0: 1}
    outcome = search(tmp_path, server, reruns=0)
    assert outcome.answer.status is Status.CLIENT_LIMITED  # type: ignore[attr-defined]
    assert [load for load, _ in server.seen] == [1]


@pytest.mark.parametrize("planner", [PlannerName.SMOOTH_ISOTONIC, PlannerName.MONOTONIC])
def test_a_rate_search_lands_within_the_planners_precision(
    tmp_path: Path, planner: PlannerName
) -> None:
    """True capacity 3.37 req/s: the bracket holds it and is within AIPerf's 5% precision."""
    server = cliff(3.37)
    outcome = search(tmp_path, server, axis=Axis.RATE, low=0.5, high=64.0, planner=planner)
    answer = outcome.answer  # type: ignore[attr-defined]
    assert answer.status is Status.FOUND
    assert answer.capacity <= 3.37 < answer.lowest_failing
    assert (answer.lowest_failing - answer.capacity) / answer.lowest_failing < 0.05
    assert answer.confidence["convergence_reason"].endswith("precision_reached")


def test_the_bayesian_planner_brackets_the_capacity(tmp_path: Path) -> None:
    server = cliff(6)
    outcome = search(tmp_path, server, high=16, planner=PlannerName.BAYESIAN, max_probes=8)
    answer = outcome.answer  # type: ignore[attr-defined]
    assert answer.capacity is None or answer.capacity <= 6
    assert answer.lowest_failing is None or answer.lowest_failing > 6
    assert sum(p.counted for p in outcome.probes) <= 8  # type: ignore[attr-defined]


def test_everything_above_the_range_passing_is_a_lower_bound(tmp_path: Path) -> None:
    outcome = search(tmp_path, cliff(1000), high=16)
    answer = outcome.answer  # type: ignore[attr-defined]
    assert answer.status is Status.ABOVE_RANGE and answer.capacity == 16
    assert answer.lowest_failing is None


def test_failing_at_the_bottom_of_the_range_is_below_it(tmp_path: Path) -> None:
    outcome = search(tmp_path, cliff(0), low=2, high=16)
    answer = outcome.answer  # type: ignore[attr-defined]
    assert answer.status is Status.BELOW_RANGE
    assert answer.capacity is None and answer.lowest_failing == 2


def test_the_tables_show_each_probe_and_the_answer(tmp_path: Path) -> None:
    from rich.console import Console

    from inferlab_bench.cli.capacity import answer_table, probe_table

    server = cliff(11)
    server.invalid = {8.0: 1}
    outcome = search(tmp_path, server)
    console = Console(width=200, record=True)
    req_spec = SearchSpec(
        axis=Axis.CONCURRENCY, low=1, high=64, criterion=Criterion(kind="attainment", value=0.95)
    )
    console.print(probe_table(outcome, req_spec), answer_table(outcome, req_spec))  # type: ignore[arg-type]
    text = console.export_text()
    assert "c=11" in text and "c=12" in text
    assert "FAIL" in text  # the invalid c=8 probe, listed and not counted
    assert "found" in text and "ttft_ms" in text
    assert (tmp_path / "capacity.json").is_file() and (
        tmp_path / "plots" / "capacity.png"
    ).is_file()


def test_a_probe_that_cannot_be_measured_is_not_blamed_on_the_client(tmp_path: Path) -> None:
    """A failed case (here: a server that answers nothing) stops the search as unmeasured."""

    def dead(request: object, options: object, engine: object) -> object:
        return figures([], status="failed")

    outcome = search(tmp_path, dead)  # type: ignore[arg-type]
    answer = outcome.answer  # type: ignore[attr-defined]
    assert answer.status is Status.UNMEASURED and answer.capacity is None
    assert "could not be measured" in answer.message and "AIPerf exited" in answer.message
    assert "--engine kube" not in answer.message
    assert len(outcome.probes) == 2  # type: ignore[attr-defined]


def test_a_signal_in_a_probe_stops_the_search_and_keeps_what_it_ran(tmp_path: Path) -> None:
    """The case answers SIGTERM with a failed result; the search must not re-run it."""
    server = cliff(11)

    def interrupted(request: object, options: object, engine: object) -> object:
        if len(server.seen) == 2:
            return figures(
                [],
                status="failed",
                error="case interrupted by a signal (SIGTERM) while AIPerf was running",
            )
        return server(request, options, engine)  # type: ignore[arg-type]

    with pytest.raises(InterruptedStageError, match="SIGTERM"):
        search(tmp_path, interrupted)  # type: ignore[arg-type]
    document = json.loads((tmp_path / "capacity.json").read_text())
    assert document["status"] == "failed" and document["answer"] is None
    assert "SIGTERM" in document["error"]
    assert [p["load"] for p in document["probes"]] == [1, 2]


def test_a_signal_between_probes_stops_the_search(tmp_path: Path) -> None:
    server = cliff(11)

    def signalled(request: object, options: object, engine: object) -> object:
        if len(server.seen) == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return server(request, options, engine)  # type: ignore[arg-type]

    with pytest.raises(InterruptedStageError, match="capacity search interrupted"):
        search(tmp_path, signalled)  # type: ignore[arg-type]
    assert len(server.seen) == 3


def test_a_percentile_search_gives_aiperf_the_latency_at_that_percentile(tmp_path: Path) -> None:
    """p90 of TTFT <= 200 ms: beyond c=9 every fourth request is slow (p90 400 ms). AIPerf's
    filter on time_to_first_token p90 and our verdict agree at every probe (else it raises)."""
    outcome = search(tmp_path, cliff(9), criterion=Criterion(kind="percentile", value=90))
    answer = outcome.answer  # type: ignore[attr-defined]
    assert (answer.status, answer.capacity, answer.lowest_failing) == (Status.FOUND, 9, 10)
    assert answer.first_breach == "ttft_ms" and "400 ms" in answer.first_breach_detail
    assert "time_to_first_token.p90.le.200" in answer.confidence["binding_constraint"]

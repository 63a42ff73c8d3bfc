"""Tables mark a percentile the run's sample size does not certify, and say why in words."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from rich.console import Console, RenderableType

from inferlab_bench.protocol import BenchClientResult
from inferlab_bench.report.rundir import SavedCase
from inferlab_bench.report.tables import UNCERTIFIED_NOTE, case_table, sweep_table
from inferlab_bench.validity.certify import certify
from tests.protocol import examples


def rendered(table: RenderableType) -> str:
    out = io.StringIO()
    Console(file=out, width=250, color_system=None).print(table)
    return out.getvalue()


def case(requests: int) -> SavedCase:
    result = BenchClientResult.model_validate_json(json.dumps(examples.case_result_succeeded()))
    metrics = {**result.metrics, "p99_ttft_ms": 412.0, "p50_ttft_ms": 100.0}
    result = result.model_copy(update={"metrics": metrics})
    samples = np.linspace(50.0, 450.0, requests)
    validity = {"certification": [certify(samples, "ttft_ms").model_dump(mode="json")]}
    return SavedCase(directory=Path("case"), result=result, request=None, validity=validity)


def test_an_uncertified_p99_is_starred_with_a_footnote_in_words() -> None:
    text = rendered(sweep_table([case(40)]))
    assert "412.00*" in text and UNCERTIFIED_NOTE.split("(")[0].strip() in " ".join(text.split())
    single = rendered(case_table(case(40).result, validity=case(40).validity))
    assert "412.00*" in single and "not certified" in single


def test_a_certified_p99_is_printed_plain() -> None:
    text = rendered(sweep_table([case(700)]))
    assert "412.00" in text and "412.00*" not in text and "not certified" not in text


def _all_good(goodput: float) -> SavedCase:
    saved = case(700)
    slo = saved.result.request_slo
    assert slo is not None
    slo = slo.model_copy(update={"goodput": goodput})
    result = saved.result.model_copy(update={"request_slo": slo})
    return SavedCase(saved.directory, result, None, saved.validity)


def test_goodput_above_throughput_says_it_is_two_durations() -> None:
    above = _all_good(3.6)  # throughput 3.5 req/s over AIPerf's phase
    for text in (rendered(sweep_table([above])), rendered(case_table(above.result))):
        flat = " ".join(text.split())
        assert (
            "goodput 3.600 > throughput 3.500 req/s only because each has its own duration" in flat
        )
        assert "AIPerf's whole profiling phase (18.0000 s)" in flat  # 63 requests / 3.5 req/s
    below = rendered(sweep_table([_all_good(3.2)]))
    assert "own duration" not in below

"""aiperf_config: the request -> AIPerf config translation, checked against AIPerf's own schema."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import aiperf
import jsonschema
import pytest
from pydantic import ValidationError

from inferlab_bench.case.aiperf_config import build_plan, build_request_body
from inferlab_bench.case.aiperf_plugin.switches import (
    CREDIT_WAIT_TIMING_MODE,
    RESET_AFTER_WARMUP_TIMING_MODE,
    TRANSPORT,
)
from inferlab_bench.errors import ConfigurationError
from tests.case.support import make_request

AIPERF_SCHEMA = Path(aiperf.__file__).parent / "config" / "schema" / "aiperf-config.schema.json"
SHAPES = {
    "concurrency": {"kind": "concurrency_limited", "concurrency": 3},
    "poisson": {"kind": "request_rate_limited", "request_rate": 5.0, "burstiness": None},
    "gamma": {"kind": "request_rate_limited", "request_rate": 5.0, "burstiness": 0.5},
    "unbounded": {"kind": "unbounded_request_rate"},
}
POPULATION = {
    "path": "/data/population.jsonl",
    "sha256": "0" * 64,
    "entries": 10,
    "tpot_applicable": True,
}
RANDOM = {"kind": "random", "input_tokens": 32, "output_tokens": 8}


@cache
def _validator(extra_timing_modes: tuple[str, ...] = ()) -> jsonschema.Draft202012Validator:
    schema = json.loads(AIPERF_SCHEMA.read_text())
    schema["$defs"]["TimingMode"]["enum"] += list(extra_timing_modes)
    return jsonschema.Draft202012Validator(schema)


def plan(tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    reset_after_warmup = kwargs.pop("reset_after_warmup", False)
    request = make_request(port=8000, artifact_dir=tmp_path, **kwargs)
    return build_plan(
        request,
        aiperf_dir=tmp_path / "aiperf",
        timeout_seconds=42.5,
        reset_after_warmup=reset_after_warmup,
    ).config


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("source", ["dataset", "random"])
def test_every_load_shape_validates_against_the_packaged_schema(
    tmp_path: Path, shape: str, source: str
) -> None:
    kwargs: dict[str, Any] = (
        {"population": POPULATION} if source == "dataset" else {"source": RANDOM}
    )
    config = plan(
        tmp_path,
        load_shape=SHAPES[shape],
        request_count=5,
        slo={"ttft_ms": 100.0, "tpot_ms": 5.0, "minimum_good_request_ratio": 0.9},
        **kwargs,
    )
    _validator().validate(config)


def test_load_shapes_map_to_aiperf_phases(tmp_path: Path) -> None:
    phases = {
        name: plan(tmp_path, population=POPULATION, load_shape=shape, request_count=5)["benchmark"][
            "profiling"
        ]
        for name, shape in SHAPES.items()
    }
    assert phases["concurrency"] == {"type": "concurrency", "concurrency": 3, "requests": 5}
    assert phases["poisson"] == {"type": "poisson", "rate": 5.0, "requests": 5}
    assert phases["gamma"] == {"type": "gamma", "rate": 5.0, "smoothness": 0.5, "requests": 5}
    assert phases["unbounded"] == {"type": "concurrency", "concurrency": 5, "requests": 5}


def test_a_concurrency_above_the_request_count_is_capped_there(tmp_path: Path) -> None:
    # AIPerf 0.13 given concurrency 4294967295 for 4 requests stalled until the budget ran
    # out, and the error named the budget; no more than 4 can ever be in flight.
    huge = {"kind": "concurrency_limited", "concurrency": 2**32 - 1}
    config = plan(tmp_path, population=POPULATION, load_shape=huge, request_count=4, warmup=2)
    benchmark = config["benchmark"]
    assert benchmark["profiling"] == {"type": "concurrency", "concurrency": 4, "requests": 4}
    assert benchmark["warmup"] == {"type": "concurrency", "concurrency": 2, "requests": 2}
    _validator().validate(config)


def test_dataset_endpoint_and_warmup(tmp_path: Path) -> None:
    config = plan(tmp_path, population=POPULATION, request_count=4, warmup=3)["benchmark"]
    assert config["dataset"] == {
        "type": "file",
        "path": "/data/population.jsonl",
        "format": "mooncake_trace",
        "entries": 7,
        "sampling": "sequential",
    }
    assert config["warmup"] == {"type": "concurrency", "concurrency": 2, "requests": 3}
    endpoint = config["endpoint"]
    assert endpoint["url"] == "http://127.0.0.1:8000" and endpoint["path"] == "/v1/chat/completions"
    assert endpoint["streaming"] and endpoint["useServerTokenCount"] and endpoint["timeout"] == 42.5
    assert config["artifacts"]["summary"] == ["json"] and config["artifacts"]["raw"] is True
    assert config["runtime"] == {"ui": "none"} and config["gpuTelemetry"] == {"enabled": False}


def test_random_source_is_seeded_and_asks_for_min_tokens(tmp_path: Path) -> None:
    config = plan(tmp_path, source=RANDOM, request_count=4)
    dataset = config["benchmark"]["dataset"]
    assert dataset["prompts"] == {"isl": 32, "osl": 8} and dataset["randomSeed"] == 7
    assert config["benchmark"]["endpoint"]["extra"]["min_tokens"] == 8


def test_slos_map_to_aiperf_tags(tmp_path: Path) -> None:
    slo = {
        "request_latency_ms": 900.0,
        "ttft_ms": 100.0,
        "tpot_ms": 5.0,
        "minimum_good_request_ratio": 0.9,
    }
    config = plan(tmp_path, population=POPULATION, slo=slo)
    assert config["benchmark"]["slos"] == {
        "request_latency": 900.0,
        "time_to_first_token": 100.0,
        "inter_token_latency": 5.0,
    }


def test_body_defaults_merge_under_the_request_body_and_replacements_are_recorded(
    tmp_path: Path,
) -> None:
    request = make_request(
        port=1,
        artifact_dir=tmp_path,
        population=POPULATION,
        body={"temperature": 0.0, "n": 1, "stream_options": {"include_usage": False, "x": 1}},
    )
    record = build_request_body(request)
    assert record.body == {
        "ignore_eos": True,
        "n": 1,
        "temperature": 0.0,
        "stream_options": {"include_usage": False, "x": 1},
    }
    assert record.replaced == {"stream_options.include_usage": {"default": True, "value": False}}


def test_warmup_needs_a_concurrency_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="warmup needs a concurrency_limited load"):
        plan(tmp_path, population=POPULATION, load_shape=SHAPES["poisson"], warmup=2)


def test_impossible_cases_are_configuration_errors(tmp_path: Path) -> None:
    # A zero request_count or request_rate is now refused by the wire model itself.
    with pytest.raises((ConfigurationError, ValidationError), match="request_count"):
        plan(tmp_path, population=POPULATION, request_count=0)
    with pytest.raises(ConfigurationError, match="needs the prepared population"):
        plan(tmp_path)
    with pytest.raises((ConfigurationError, ValidationError), match="request_rate"):
        plan(
            tmp_path,
            population=POPULATION,
            load_shape={"kind": "request_rate_limited", "request_rate": 0.0},
        )


def test_reset_after_warmup_selects_our_registered_timing_strategy(tmp_path: Path) -> None:
    from aiperf.plugin.enums import TimingMode

    config = plan(tmp_path, population=POPULATION, warmup=2, reset_after_warmup=True)
    assert config["benchmark"]["profiling"]["timingMode"] == RESET_AFTER_WARMUP_TIMING_MODE
    assert "timingMode" not in config["benchmark"]["warmup"]
    # The packaged schema lists only built-in strategies; AIPerf's runtime enum has ours too.
    registered = tuple(str(mode) for mode in TimingMode)
    assert RESET_AFTER_WARMUP_TIMING_MODE in registered
    with pytest.raises(jsonschema.ValidationError):
        _validator().validate(config)
    _validator((RESET_AFTER_WARMUP_TIMING_MODE,)).validate(copy.deepcopy(config))


def test_our_plugins_are_named_where_they_run_and_nowhere_else(tmp_path: Path) -> None:
    """Where our plugins are installed (a local run) the config names our profiling strategy
    and our transport; elsewhere (a dry run for another engine) AIPerf's built-ins run."""
    from aiperf.plugin.enums import TimingMode, TransportType

    request = make_request(port=8000, artifact_dir=tmp_path, population=POPULATION, warmup=2)
    ours = build_plan(request, aiperf_dir=tmp_path, timeout_seconds=9.0, our_plugins=True).config
    assert ours["benchmark"]["profiling"]["timingMode"] == CREDIT_WAIT_TIMING_MODE
    assert ours["benchmark"]["endpoint"]["transport"] == TRANSPORT
    assert "timingMode" not in ours["benchmark"]["warmup"]  # AIPerf ignores it there
    plain = build_plan(request, aiperf_dir=tmp_path, timeout_seconds=9.0).config
    assert "timingMode" not in plain["benchmark"]["profiling"]
    assert "transport" not in plain["benchmark"]["endpoint"]
    # Registered under our own names, beside AIPerf's built-ins (which stay as shipped).
    assert {CREDIT_WAIT_TIMING_MODE, "request_rate"} <= {str(m) for m in TimingMode}
    assert {TRANSPORT, "http"} <= {str(t) for t in TransportType}
    schema = _validator((CREDIT_WAIT_TIMING_MODE,))
    schema.schema["$defs"]["TransportType"]["enum"].append(TRANSPORT)
    schema.validate(copy.deepcopy(ours))

"""reset: option parsing, success rule, detection and the call against the simulated server."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferlab_bench.case.reset import (
    ResetTarget,
    detect_target,
    is_success,
    parse_reset_option,
    raise_unless_ok,
    read_evidence,
    reset_prefix_cache,
    write_evidence,
)
from inferlab_bench.errors import ConfigurationError, PrefixCacheResetError
from inferlab_bench.simulator import SimulatorConfig, running_simulator


def test_framework_names_and_explicit_paths() -> None:
    assert parse_reset_option("vllm") == ResetTarget(
        "POST", "/reset_prefix_cache", "--prefix-cache-reset vllm"
    )
    assert parse_reset_option("SGLang").path == "/flush_cache"  # type: ignore[union-attr]
    assert parse_reset_option("tokenspeed").path == "/flush_cache"  # type: ignore[union-attr]
    assert parse_reset_option("none") is None and parse_reset_option("trtllm") is None
    assert parse_reset_option("get:/cache/clear") == ResetTarget(
        "GET", "/cache/clear", "--prefix-cache-reset get:/cache/clear"
    )
    for bad in ("tgi", "POST:reset", "FETCH:/x"):
        with pytest.raises(ConfigurationError, match="expected vllm|sglang"):
            parse_reset_option(bad)


def test_success_is_2xx_except_206() -> None:
    assert is_success(200) and is_success(204)
    assert not is_success(206) and not is_success(404) and not is_success(302)


def test_calls_against_the_simulator_and_their_evidence(tmp_path: Path) -> None:
    with running_simulator(SimulatorConfig(reset_endpoints=("sglang",))) as sim:
        assert detect_target(sim.base_url).path == "/reset_prefix_cache"  # it says owned_by vllm
        good = reset_prefix_cache(sim.base_url, ResetTarget("POST", "/flush_cache", "test"))
        missing = reset_prefix_cache(
            sim.base_url, ResetTarget("POST", "/reset_prefix_cache", "test")
        )
        assert sim.reset_count == 1
    assert (
        good.ok and good.status == 200 and good.url.endswith("/flush_cache") and good.duration > 0
    )
    assert not missing.ok and missing.status == 404
    with pytest.raises(PrefixCacheResetError, match=r"POST .*/reset_prefix_cache failed: HTTP 404"):
        raise_unless_ok(missing)
    write_evidence(tmp_path / "e.json", None, [good, missing], when="before-run")
    assert read_evidence(tmp_path / "e.json") == [good, missing]


def test_unreachable_server_and_unknown_framework() -> None:
    call = reset_prefix_cache(
        "http://127.0.0.1:9", ResetTarget("POST", "/flush_cache", "t"), timeout=2
    )
    assert not call.ok and call.status is None and "ConnectError" in (call.error or "")
    with pytest.raises(PrefixCacheResetError, match="framework is unknown"):
        detect_target("http://127.0.0.1:9", timeout=1)

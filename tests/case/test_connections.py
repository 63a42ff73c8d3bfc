"""Connection settings per server: the option, or what the server says it is."""

from __future__ import annotations

import orjson
import pytest

from inferlab_bench.case.aiperf_plugin.switches import (
    PRECONNECT_ENV_VAR,
    PRECONNECT_MAX,
    WIRE_START_ENV_VAR,
    with_preconnect,
    with_wire_start,
)
from inferlab_bench.case.connections import (
    CLOSE_ENV,
    ConnectionPolicy,
    choose,
    parse_option,
)
from inferlab_bench.errors import ConfigurationError
from inferlab_bench.simulator import SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR


def test_options() -> None:
    assert parse_option(None) is None
    assert parse_option("auto") is None
    assert parse_option("Close") is ConnectionPolicy.CLOSE
    assert parse_option("pooled") is ConnectionPolicy.POOLED
    with pytest.raises(ConfigurationError, match="--connections: expected auto|pooled|close"):
        parse_option("sometimes")


def test_an_explicit_close_sets_aiperfs_force_close_and_no_keepalive() -> None:
    choice = choose("http://127.0.0.1:9", "close")
    assert (
        choice.env
        == CLOSE_ENV
        == {
            "AIPERF_HTTP_FORCE_CLOSE": "true",
            "AIPERF_HTTP_KEEPALIVE_TIMEOUT": "0",
        }
    )
    assert choice.as_json()["origin"] == "--connections close"


def test_a_server_not_known_to_drop_connections_keeps_the_pool() -> None:
    config = SimulatorConfig(model="sim", tokenizer=TOKENIZER_DIR)
    with running_simulator(config) as sim:
        choice = choose(sim.base_url, None)
    assert choice.policy is ConnectionPolicy.POOLED and choice.env == {}
    assert choice.origin.startswith("detected from GET /v1/models owned_by")


def test_a_pooled_concurrency_load_opens_one_connection_per_slot_ahead() -> None:
    pooled = choose("http://127.0.0.1:9", "pooled")
    choice = with_preconnect(pooled, "http://127.0.0.1:8000/", 4)
    assert orjson.loads(choice.env[PRECONNECT_ENV_VAR]) == {
        "url": "http://127.0.0.1:8000/v1/models",
        "connections": 4,
    }
    assert PRECONNECT_ENV_VAR in choice.as_json()["aiperf_environment"]  # recorded
    wide = with_preconnect(pooled, "http://h", PRECONNECT_MAX * 10).env[PRECONNECT_ENV_VAR]
    assert orjson.loads(wide)["connections"] == PRECONNECT_MAX


def test_no_preconnect_for_a_rate_load_or_a_closing_server() -> None:
    pooled = choose("http://127.0.0.1:9", "pooled")
    assert with_preconnect(pooled, "http://h", None) == pooled
    closing = choose("http://127.0.0.1:9", "close")
    assert with_preconnect(closing, "http://h", 8).env == CLOSE_ENV


def test_the_start_at_the_first_byte_on_a_pooled_server_only() -> None:
    pooled = with_wire_start(choose("http://127.0.0.1:9", "pooled"))
    assert pooled.env == {WIRE_START_ENV_VAR: "1"}
    assert pooled.as_json()["aiperf_environment"] == {WIRE_START_ENV_VAR: "1"}  # recorded
    closing = choose("http://127.0.0.1:9", "close")
    assert with_wire_start(closing) == closing  # the connect stays in the request's time

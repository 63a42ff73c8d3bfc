"""Connection settings per server: the option, or what the server says it is."""

from __future__ import annotations

import pytest

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

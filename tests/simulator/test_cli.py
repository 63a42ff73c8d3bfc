"""``inferlab-bench simulate`` as a real subprocess: URL line, /health, SIGTERM -> exit 0."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys

import httpx
import pytest

from inferlab_bench.cli import build_parser
from inferlab_bench.cli.simulate import config_from_args
from inferlab_bench.simulator import LimitsConfig

pytestmark = pytest.mark.timeout(60)


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["simulate", *argv])


def test_flags_become_one_config() -> None:
    config = config_from_args(
        _args(
            "--port",
            "0",
            "--reset-endpoint",
            "sglang",
            "--error-rate",
            "0.25",
            "--error-status",
            "429",
            "--reset-noop",
            "--decode-base-ms",
            "3",
        )
    )
    assert config.reset_endpoints == ("sglang",) and config.port == 0
    assert config.faults.error_rate == 0.25 and config.faults.error_status == 429
    assert config.faults.reset_noop and config.latency.decode_base_ms == 3
    assert config_from_args(_args("--zero-latency")).latency.is_zero
    assert config_from_args(_args("--reset-endpoint", "none")).reset_endpoints == ()


def test_bound_flags_become_the_limits() -> None:
    limits = config_from_args(
        _args("--max-n", "4", "--max-body-bytes", "2048", "--idle-timeout-seconds", "2.5")
    ).limits
    assert limits.max_n == 4 and limits.max_body_bytes == 2048
    assert limits.idle_timeout_seconds == 2.5 and limits.max_messages == 4096  # the default
    assert config_from_args(_args()).limits == LimitsConfig()


def test_a_bad_bound_is_one_line_naming_its_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from inferlab_bench.cli import main

    assert main(["simulate", "--idle-timeout-seconds", "inf"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--idle-timeout-seconds" in err, err


def test_subprocess_serves_until_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "inferlab_bench", "simulate", "--port", "0", "--zero-latency"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split()[-1]
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
        assert httpx.get(f"{url}/health").status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_invalid_option_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    from inferlab_bench.cli.simulate import run

    assert run(_args("--error-rate", "2")) == 2
    assert "--error-rate: expected a number <= 1" in capsys.readouterr().err

"""Hostile baselines: peers' files made to lie or to hurt (negative latencies, 1e308, NaN as
text, wrong types, huge arrays, deep nesting, wrong encodings, YAML bombs, devices). Each is
refused with one line naming the field or the problem, never a traceback, never judged."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inferlab_bench.errors import BaselineError
from inferlab_bench.publish.baselines import load_baseline
from inferlab_bench.publish.peers.documents import MAX_BYTES
from tests.cli.test_human import cli

FIXTURES = Path(__file__).parent / "fixtures"


def _vllm() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "vllm-0.33.0-c2-detailed.json").read_text())
    return data


def _guidellm() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "guidellm-0.8.1-sweep-c1-c2.json").read_text())
    return data


def _sglang_line(**changes: Any) -> dict[str, Any]:
    line = {
        "backend": "sglang",
        "request_rate": 1.0,
        "max_concurrency": None,
        "completed": 300,
        "mean_e2e_latency_ms": 7840.6,
        "median_e2e_latency_ms": 7819.0,
        "median_ttft_ms": 85.7,
        "output_throughput": 537.4,
    }
    return line | changes


def _json(data: Any) -> bytes:
    return json.dumps(data).encode()


def _vllm_with(**changes: Any) -> bytes:
    return _json(_vllm() | changes)


def _vllm_text(key: str, literal: str) -> bytes:
    """A vLLM file whose ``key`` holds a raw JSON literal (NaN, Infinity)."""
    data = _vllm() | {key: "__HERE__"}
    return json.dumps(data).replace('"__HERE__"', literal).encode()


def _guidellm_with(change: Callable[[dict[str, Any]], None]) -> bytes:
    data = _guidellm()
    change(data["benchmarks"][0])
    return _json(data)


def _ttft(benchmark: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = benchmark["metrics"]["time_to_first_token_ms"]["successful"]
    return summary


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(benchmark: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = benchmark
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value

    return change


def _deep(depth: int) -> bytes:
    return b'{"median_ttft_ms": 1.0, "x": ' + b"[" * depth + b"]" * depth + b"}"


def _export(**changes: Any) -> bytes:
    export = {
        "aiperf_version": "0.13.0",
        "input_config": {"models": {"items": [{"name": "sim"}]}, "phases": []},
        "time_to_first_token": {"avg": 60.0, "p99": 64.0},
        "request_latency": {"avg": 300.0},
    }
    return _json(export | changes)


BOMB = (
    b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
    + b"c: [*b, *b]\n"
)

# (name, bytes, what the one-line error must say)
HOSTILE: list[tuple[str, Callable[[], bytes], str]] = [
    ("negative mean TTFT", lambda: _vllm_with(mean_ttft_ms=-5.0), "mean_ttft_ms: "),
    ("1e308 p99 TTFT", lambda: _vllm_with(p99_ttft_ms=1e308), "p99_ttft_ms: "),
    ("NaN as text", lambda: _vllm_with(median_tpot_ms="NaN"), "median_tpot_ms: "),
    ("NaN literal", lambda: _vllm_text("mean_e2el_ms", "NaN"), "mean_e2el_ms: "),
    ("Infinity literal", lambda: _vllm_text("p90_e2el_ms", "Infinity"), "p90_e2el_ms: "),
    ("-Infinity literal", lambda: _vllm_text("p99_tpot_ms", "-Infinity"), "p99_tpot_ms: "),
    ("a mapping as a latency", lambda: _vllm_with(mean_ttft_ms={}), "mean_ttft_ms: "),
    ("negative throughput", lambda: _vllm_with(output_throughput=-1.0), "output_throughput: "),
    ("1e308 throughput", lambda: _vllm_with(output_throughput=1e308), "output_throughput: "),
    ("text throughput", lambda: _vllm_with(output_throughput="fast"), "output_throughput: "),
    ("bool throughput", lambda: _vllm_with(request_throughput=True), "request_throughput: "),
    ("negative count", lambda: _vllm_with(completed=-3), "completed: "),
    ("fractional count", lambda: _vllm_with(completed=1.5), "completed: "),
    ("1e12 count", lambda: _vllm_with(completed=10**12), "completed: "),
    ("count as text", lambda: _vllm_with(max_concurrency="2"), "max_concurrency: "),
    ("model as a number", lambda: _vllm_with(model_id=123), "model_id: "),
    ("5000-char model", lambda: _vllm_with(model_id="m" * 5000), "model_id: "),
    ("negative rate", lambda: _vllm_with(request_rate=-1.0), "request_rate: "),
    ("rate as text", lambda: _vllm_with(request_rate="fast"), "request_rate: "),
    ("zero burstiness", lambda: _vllm_with(burstiness=0.0), "burstiness: "),
    ("negative per-request TTFT", lambda: _vllm_with(ttfts=[-0.1] * 8), "ttfts.0: "),
    ("per-request TTFTs as text", lambda: _vllm_with(ttfts="abc"), "ttfts: "),
    ("negative token gap", lambda: _vllm_with(itls=[[0.01, -1.0]] * 8), "itls.0.1: "),
    ("1e308 latency", lambda: _vllm_with(latencies=[1e308] * 8), "latencies.0: "),
    ("negative output length", lambda: _vllm_with(output_lens=[-1] * 8), "output_lens.0: "),
    ("a million and one TTFTs", lambda: _vllm_with(ttfts=[0.1] * 1_000_001), "ttfts: "),
    (
        "second sweep run lies",
        lambda: _json([_vllm(), _vllm() | {"mean_ttft_ms": -1.0}]),
        "[1].mean_ttft_ms: ",
    ),
    (
        "GuideLLM negative mean",
        lambda: _guidellm_with(lambda b: _ttft(b).update(mean=-1.0)),
        "benchmarks.0.metrics.time_to_first_token_ms.successful.mean: ",
    ),
    (
        "GuideLLM 1e308 percentile",
        lambda: _guidellm_with(lambda b: _ttft(b)["percentiles"].update(p99=1e308)),
        "time_to_first_token_ms.successful.percentiles.p99: ",
    ),
    (
        "GuideLLM negative count",
        lambda: _guidellm_with(lambda b: _ttft(b).update(count=-1)),
        "time_to_first_token_ms.successful.count: ",
    ),
    (
        "GuideLLM negative request latency",
        lambda: _guidellm_with(_set("requests.successful.0.request_latency", -0.5)),
        "benchmarks.0.requests.successful.0.request_latency: ",
    ),
    (
        "GuideLLM start time as text",
        lambda: _guidellm_with(_set("requests.successful.0.request_start_time", "yesterday")),
        "requests.successful.0.request_start_time: ",
    ),
    (
        "GuideLLM strategy as text",
        lambda: _guidellm_with(_set("config.strategy", "concurrent")),
        "benchmarks.0.config.strategy: ",
    ),
    (
        "GuideLLM negative streams",
        lambda: _guidellm_with(_set("config.strategy.streams", -2)),
        "config.strategy.streams: ",
    ),
    (
        "GuideLLM window start NaN",
        lambda: _guidellm_with(_set("scheduler_metrics.measure_start_time", "NaN")),
        "scheduler_metrics.measure_start_time: ",
    ),
    (
        "GuideLLM version as a number",
        lambda: _json(_guidellm() | {"metadata": {"guidellm_version": 5}}),
        "metadata.guidellm_version: ",
    ),
    (
        "SGLang negative latency on line 2",
        lambda: _json(_sglang_line()) + b"\n" + _json(_sglang_line(mean_e2e_latency_ms=-1.0)),
        "line 2.mean_e2e_latency_ms: ",
    ),
    (
        "SGLang count as text",
        lambda: _json(_sglang_line()) + b"\n" + _json(_sglang_line(completed="300")),
        "line 2.completed: ",
    ),
    (
        "SGLang broken second line",
        lambda: _json(_sglang_line()) + b'\n{"median_e2e_latency_ms": \n',
        "line 2 is not valid JSON",
    ),
    (
        "AIPerf negative p99",
        lambda: _export(time_to_first_token={"avg": 1.0, "p99": -1.0}),
        "time_to_first_token.p99: ",
    ),
    (
        "AIPerf phases as text",
        lambda: _export(input_config={"phases": "x"}),
        "input_config.phases: ",
    ),
    ("nesting 100000 deep", lambda: b"[" * 100_000 + b"]" * 100_000, "nested"),
    ("nesting 5000 deep inside a field", lambda: _deep(5000), "nested"),
    ("UTF-16 with BOM", lambda: json.dumps(_vllm()).encode("utf-16"), "encoded as UTF-16"),
    (
        "Latin-1 bytes",
        lambda: _vllm_with(model_id="x").replace(b'"x"', '"caf\u00e9"'.encode("latin-1")),
        "not UTF-8",
    ),
    ("JPEG bytes", lambda: b"\xff\xd8\xff\xe0\x00\x10JFIF", "not UTF-8"),
    ("empty", lambda: b"", "the file is empty"),
    ("blank", lambda: b"  \n\n ", "the file is empty"),
    ("truncated JSON", lambda: _vllm_with()[:500], "not valid JSON"),
    ("YAML alias bomb", lambda: BOMB, "aliases (*name) are not read"),
    (
        "YAML python tag",
        lambda: b"benchmarks: !!python/object/apply:os.system ['touch /tmp/pwned']\n",
        "neither JSON nor valid YAML",
    ),
    ("YAML scalar", lambda: b"just words\n", "not a result file of a tool we read"),
    ("JSON number", lambda: b"42", "not a result file of a tool we read"),
]


ON_THE_COMMAND_LINE = [
    "negative mean TTFT",
    "NaN literal",
    "GuideLLM negative request latency",
    "UTF-16 with BOM",
    "YAML alias bomb",
    "YAML python tag",
]


def test_at_least_forty_hostile_baselines() -> None:
    assert len(HOSTILE) >= 40


@pytest.mark.parametrize(("name", "make", "expected"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_baseline_is_refused_in_one_line_naming_the_field(
    name: str, make: Callable[[], bytes], expected: str, tmp_path: Path
) -> None:
    path = tmp_path / "hostile.json"
    path.write_bytes(make())
    with pytest.raises(BaselineError) as caught:
        load_baseline(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: "), message
    assert expected in message, message
    assert "\n" not in message and len(message) < 1500, message


def test_files_beyond_the_size_cap_and_devices_are_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(MAX_BYTES + 1)  # sparse: nothing is written, nothing must be read
    with pytest.raises(BaselineError, match="more than the .* bytes a result file may have"):
        load_baseline(big)
    device = tmp_path / "zero.json"
    os.symlink("/dev/zero", device)
    with pytest.raises(BaselineError, match="not a regular file"):
        load_baseline(device)


@pytest.mark.parametrize(
    ("name", "make", "expected"),
    [h for h in HOSTILE if h[0] in ON_THE_COMMAND_LINE],
    ids=ON_THE_COMMAND_LINE,
)
def test_compare_prints_one_line_and_no_traceback(
    name: str, make: Callable[[], bytes], expected: str, tmp_path: Path
) -> None:
    path = tmp_path / "hostile.json"
    path.write_bytes(make())
    proc = cli("compare", path, tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and expected in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr

"""The same mistake reads the same in a flag and in a JSON request: only the name differs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inferlab_bench.cli import main
from tests.protocol import examples

LOAD = {"kind": "concurrency_limited", "concurrency": 4}
# (request field path, bad JSON value, flag, bad flag text): the same mistake in both modes.
SAME_MISTAKES = [
    (("case", "load_shape", "concurrency"), "abc", "--concurrency", "abc"),
    (("case", "load_shape", "concurrency"), 1.5, "--concurrency", "1.5"),
    (("case", "warmup_request_count"), -1, "--warmup", "-1"),
    (("definition", "seed"), -1, "--seed", "-1"),
    (("case_budget_seconds",), "abc", "--budget", "abc"),
]


def _with(request: dict[str, Any], path: tuple[str, ...], value: object) -> dict[str, Any]:
    node = request
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return request


def _expectation(line: str, name: str) -> str:
    """What follows ``name: `` up to the found value."""
    rest = line.split(f"{name}: ", 1)[1] if f"{name}: " in line else line
    return rest.split(" (found ", 1)[0]


@pytest.mark.parametrize(("path", "value", "flag", "text"), SAME_MISTAKES)
def test_a_mistake_reads_the_same_in_both_modes(
    path: tuple[str, ...],
    value: object,
    flag: str,
    text: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps(_with(examples.case_request(LOAD), path, value)))
    output = tmp_path / "result.json"
    assert main(["case", "--input", str(request), "--output", str(output)]) == 0
    error = json.loads(output.read_text())["error"]
    field = path[-1]  # a tagged union puts its tag in the path: load_shape.<kind>.concurrency
    flags = [
        "run", "--url", "http://127.0.0.1:9", "--model", "m", "--tokenizer", str(tmp_path),
        "--requests", "4", "--random-input-tokens", "8", "--random-output-tokens", "4",
        "--out", str(tmp_path / "out"), "--concurrency", "2", flag, text,
    ]  # fmt: skip
    if flag == "--concurrency":
        flags[-4:-2] = []
    assert main(flags) == 2
    line = capsys.readouterr().err.strip()
    assert _expectation(error, field) == _expectation(line, flag)
    assert _expectation(line, flag).startswith("expected ")

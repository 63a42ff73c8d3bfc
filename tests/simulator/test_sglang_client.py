"""SGLang's own clients against the simulator: bench_serving (--backend sglang), the frontend.

SGLang 0.5.9 is the last release whose ``bench_serving`` imports without torch; `.ci/run`
installs it with ``--no-deps`` plus the two imports that leaves out (pybase64, and IPython,
which ``sglang.utils`` imports at the top). Its native request function is the same as
0.5.23's apart from how it decodes the bytes.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from inferlab_bench.simulator import LatencyConfig
from tests.simulator.conftest import StartSimulator

INSTALL = "pip install --no-deps 'sglang==0.5.9' 'pybase64==1.5.1'; pip install 'ipython==8.12.3'"


def _import_bench() -> Any:
    """``sglang.bench_serving``, or a skip naming what is missing: SGLang itself, or one of
    the imports that its ``--no-deps`` install leaves out."""
    try:
        return importlib.import_module("sglang.bench_serving")
    except ImportError as exc:
        missing = (getattr(exc, "name", None) or str(exc)).split(".")[0]
        if missing == "sglang":
            pytest.skip(f"SGLang's client is not installed: {INSTALL}", allow_module_level=True)
        pytest.skip(
            f"sglang is installed but importing it needs {missing!r}, which is not ({exc}): "
            f"{INSTALL} (as .ci/run and the README's test lines do)",
            allow_module_level=True,
        )


bench: Any = _import_bench()

pytestmark = pytest.mark.timeout(90)

LATENCY = LatencyConfig(prefill_base_ms=20, prefill_ms_per_token=0, decode_base_ms=10)


def _request(base_url: str, prompt: str | list[int], output_len: int) -> Any:
    func_input = bench.RequestFuncInput(
        prompt=prompt,
        api_url=f"{base_url}/generate",
        prompt_len=0,
        output_len=output_len,
        model="sim-model",
        lora_name=None,
        image_data=None,
        extra_request_body={},
    )
    return asyncio.run(bench.async_request_sglang_generate(func_input))


@pytest.mark.parametrize("stream", [True, False])
def test_sglang_request_function_reads_text_and_token_ids(
    start_simulator: StartSimulator, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # bench_serving reads its CLI options from a module global; these are its defaults.
    options = SimpleNamespace(
        disable_ignore_eos=False,
        disable_stream=not stream,
        return_logprob=False,
        return_routed_experts=False,
        header=None,
    )
    monkeypatch.setattr(bench, "args", options, raising=False)
    sim = start_simulator(latency=LATENCY)
    outputs = [_request(sim.base_url, "Tell me a story.", 6), _request(sim.base_url, [1, 2, 3], 5)]
    truth = [r for r in sim.ground_truth() if r["kind"] == "request"]
    assert [o.success for o in outputs] == [True, True], [o.error for o in outputs]
    assert [o.output_len for o in outputs] == [6, 5] == [t["completion_tokens"] for t in truth]
    assert [len(o.generated_text.split()) for o in outputs] == [6, 5]
    assert truth[1]["prompt_tokens"] == 3
    for output, record in zip(outputs, truth, strict=True):
        e2e_truth = (record["end_ns"] - record["arrival_ns"]) / 1e9
        assert e2e_truth <= output.latency + 0.002  # the client's clock spans the server's
        if stream:
            assert len(output.itl) == record["completion_tokens"] - 1
            ttft_truth = (record["first_token_ns"] - record["arrival_ns"]) / 1e9
            assert ttft_truth - 0.002 <= output.ttft < ttft_truth + 0.25  # loose: a busy host


def test_bench_serving_cli_with_the_sglang_backend(
    start_simulator: StartSimulator, qwen_dir: str, tmp_path: Path
) -> None:
    sim = start_simulator(latency=LATENCY)
    out = tmp_path / "sglang.jsonl"
    command = [
        sys.executable,
        "-m",
        "sglang.bench_serving",
        "--backend=sglang",
        f"--base-url={sim.base_url}",
        "--dataset-name=random-ids",
        "--random-input-len=32",
        "--random-output-len=8",
        "--random-range-ratio=1.0",
        "--num-prompts=6",
        "--max-concurrency=2",
        f"--tokenizer={qwen_dir}",
        "--flush-cache",
        "--warmup-requests=1",
        f"--output-file={out}",
        "--output-details",
        "--disable-tqdm",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=80, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # Python's json: the file holds `Infinity` (request_rate), which orjson refuses.
    (result,) = [json.loads(line) for line in out.read_text().splitlines()]
    truth = sim.ground_truth()
    requests = [r for r in truth if r["kind"] == "request"]
    resets = [r for r in truth if r["kind"] == "reset"]
    # One warmup request, then the flush, then the six measured ones.
    assert [r["path"] for r in requests] == ["/generate"] * 7
    assert len(resets) == 1 and resets[0]["path"] == "/flush_cache"
    assert requests[0]["end_ns"] < resets[0]["time_ns"] < requests[1]["arrival_ns"]
    assert result["completed"] == 6 and result["output_lens"] == [8] * 6
    assert all(r["completion_tokens"] == 8 and r["stream"] for r in requests)
    assert result["server_info"]["served_model_name"] == "sim-model"
    truth_ttfts = sorted((r["first_token_ns"] - r["arrival_ns"]) / 1e9 for r in requests[1:])
    for client, server in zip(sorted(result["ttfts"]), truth_ttfts, strict=True):
        assert server - 0.002 <= client < server + 0.25  # loose above: a busy host


def test_sglang_frontend_runtime_endpoint(start_simulator: StartSimulator) -> None:
    # SGLang's own frontend backend: /get_model_info at construction, /get_server_info,
    # /flush_cache, and /generate (whole and streamed) when a program runs.
    import sglang as sgl
    from sglang.lang.backend.runtime_endpoint import RuntimeEndpoint

    sim = start_simulator(max_model_len=4096)
    backend = RuntimeEndpoint(sim.base_url)
    assert backend.get_model_name() == "sim-model"
    assert backend.get_server_info()["context_length"] == 4096
    backend.flush_cache()
    assert sim.reset_count == 1

    @sgl.function
    def answer(s: Any, question: str) -> None:
        s += question + sgl.gen("answer", max_tokens=5, ignore_eos=True)

    # A program runs on SGLang's executor thread: the two may overlap, so the truth is
    # joined by the response id, not by its order.
    whole = answer.run(question="Hello", backend=backend)
    streamed = answer.run(question="Hi", backend=backend, stream=True)
    streamed_text = "".join(streamed.text_iter("answer"))
    truth = {r["request_id"]: r for r in sim.ground_truth() if r["kind"] == "request"}
    assert len(truth) == 2
    whole_truth = truth.pop(whole.get_meta_info("answer")["id"])
    (streamed_truth,) = truth.values()
    assert len(whole["answer"].split()) == 5 == whole_truth["completion_tokens"]
    assert whole_truth["stream"] is False
    assert len(streamed_text.split()) == 5 == streamed_truth["completion_tokens"]
    assert streamed_truth["stream"] is True

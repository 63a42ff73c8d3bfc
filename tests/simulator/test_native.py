"""SGLang's native API (/generate, /server_info, /model_info), over real HTTP on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.simulator.conftest import StartSimulator
from tests.simulator.sse import parsed

pytestmark = pytest.mark.timeout(30)


def _generate(**extra: Any) -> dict[str, Any]:
    params = {"max_new_tokens": 4, "ignore_eos": True, "temperature": 0.0}
    return {"text": "Once upon a time", "sampling_params": params, **extra}


def test_streamed_generate_is_cumulative_with_meta_info(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator()
    r = client.post(f"{sim.base_url}/generate", json=_generate(stream=True))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events, done = parsed(r.text)
    assert done and len(events) == 4
    texts = [e["text"] for e in events]
    assert all(later.startswith(earlier) for earlier, later in zip(texts, texts[1:], strict=False))
    assert len(texts[-1].split()) == 4
    metas = [e["meta_info"] for e in events]
    assert [m["completion_tokens"] for m in metas] == [1, 2, 3, 4]
    assert [len(e["output_ids"]) for e in events] == [1, 2, 3, 4]
    assert all(m["prompt_tokens"] == 4 for m in metas)  # 16 bytes / 4, no tokenizer
    last = {"type": "length", "length": 4}
    assert [m["finish_reason"] for m in metas] == [None, None, None, last]
    assert "e2e_latency" in metas[-1] and "e2e_latency" not in metas[0]
    (truth,) = sim.ground_truth()
    assert {m["id"] for m in metas} == {truth["request_id"]}
    assert truth["path"] == "/generate" and truth["completion_tokens"] == 4


def test_non_streamed_generate_with_input_ids(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator(seed=1)
    body = {"input_ids": list(range(40)), "sampling_params": {"max_new_tokens": 9}}
    data = client.post(f"{sim.base_url}/generate", json=body).json()
    meta = data["meta_info"]
    assert meta["prompt_tokens"] == 40
    n = meta["completion_tokens"]
    assert 1 <= n <= 9 and len(data["text"].split()) == n == len(data["output_ids"])
    expected = {"type": "length", "length": 9} if n == 9 else {"type": "stop", "matched": None}
    assert meta["finish_reason"] == expected
    assert sim.ground_truth()[0]["prompt_tokens"] == 40


def test_generate_without_max_new_tokens_uses_sglang_default(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator()
    body = {"text": "hi", "sampling_params": {"ignore_eos": True}}
    assert (
        client.post(f"{sim.base_url}/generate", json=body).json()["meta_info"]["completion_tokens"]
        == 128
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"sampling_params": {}}, "text (a string) or input_ids"),
        ({"text": "a", "input_ids": [1]}, "text and input_ids"),
        ({"text": ["a", "b"]}, "batches"),
        ({"text": "a", "sampling_params": {"max_new_tokens": -1}}, "params.max_new_tokens"),
        ({"text": "a", "sampling_params": {"temperature": "hot"}}, "sampling_params.temperature"),
        ({"text": "a", "sampling_params": {"ignore_eos": 1}}, "sampling_params.ignore_eos"),
        ({"text": "a", "sampling_params": []}, "sampling_params must be an object"),
        ({"text": "a", "stream": "yes"}, "stream"),
    ],
)
def test_bad_generate_bodies_are_400_naming_the_field(
    start_simulator: StartSimulator, client: httpx.Client, body: dict[str, Any], field: str
) -> None:
    sim = start_simulator()
    r = client.post(f"{sim.base_url}/generate", json=body)
    assert r.status_code == 400
    assert field in r.json()["error"]["message"]


def test_server_and_model_info_on_both_paths(
    start_simulator: StartSimulator, client: httpx.Client, qwen_dir: str
) -> None:
    sim = start_simulator(tokenizer=qwen_dir, max_model_len=4096, block_size=32)
    info = client.get(f"{sim.base_url}/server_info").json()
    assert info == client.get(f"{sim.base_url}/get_server_info").json()
    assert info["context_length"] == 4096 and info["page_size"] == 32
    assert info["served_model_name"] == "sim-model" and info["tokenizer_path"] == qwen_dir
    assert info["internal_states"][0]["num_running_reqs"] == 0
    model = client.get(f"{sim.base_url}/model_info").json()
    assert model == client.get(f"{sim.base_url}/get_model_info").json()
    assert model["tokenizer_path"] == qwen_dir and model["is_generation"] is True


def test_flush_cache_answers_as_sglang(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator()
    r = client.post(f"{sim.base_url}/flush_cache", params={"timeout": 5})
    assert r.status_code == 200 and r.text.startswith("Cache flushed.\n")
    assert sim.reset_count == 1

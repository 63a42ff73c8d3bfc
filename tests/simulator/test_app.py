"""The simulator's HTTP surface, over real HTTP on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import pytest

from tests.simulator.conftest import StartSimulator, chat_body
from tests.simulator.sse import content, parsed

pytestmark = pytest.mark.timeout(30)


def test_streaming_chat_has_role_tokens_usage_and_done(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator()
    r = client.post(
        f"{sim.base_url}/v1/chat/completions", json=chat_body(max_tokens=7, ignore_eos=True)
    )
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    chunks, done = parsed(r.text)
    assert done
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "sim-model" for c in chunks)
    assert len(content(chunks)) == 7
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    last = chunks[-1]
    assert last["choices"] == []
    usage = last["usage"]
    assert usage["completion_tokens"] == 7
    assert usage["total_tokens"] == usage["prompt_tokens"] + 7
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}


def test_no_usage_chunk_unless_asked(start_simulator: StartSimulator, client: httpx.Client) -> None:
    sim = start_simulator()
    body = chat_body(max_tokens=3, ignore_eos=True)
    del body["stream_options"]
    chunks, done = parsed(client.post(f"{sim.base_url}/v1/chat/completions", json=body).text)
    assert done and all("usage" not in c for c in chunks)


def test_non_streaming_chat(start_simulator: StartSimulator, client: httpx.Client) -> None:
    sim = start_simulator()
    body = chat_body(max_completion_tokens=5, ignore_eos=True, stream=False)
    data = client.post(f"{sim.base_url}/v1/chat/completions", json=body).json()
    assert data["object"] == "chat.completion"
    message = data["choices"][0]["message"]
    assert message["role"] == "assistant" and len(message["content"].split()) == 5
    assert data["usage"]["completion_tokens"] == 5
    assert data["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("stream", [True, False])
def test_text_completions(
    start_simulator: StartSimulator, client: httpx.Client, stream: bool
) -> None:
    sim = start_simulator()
    body = {
        "model": "sim-model",
        "prompt": "Once upon a time",
        "max_tokens": 4,
        "ignore_eos": True,
        "stream": stream,
        "stream_options": {"include_usage": True},
    }
    r = client.post(f"{sim.base_url}/v1/completions", json=body)
    if stream:
        chunks, done = parsed(r.text)
        assert done and len(content(chunks)) == 4
        assert chunks[0]["object"] == "text_completion"
        assert chunks[-1]["usage"]["prompt_tokens"] == 4  # 16 bytes / 4
    else:
        data = r.json()
        assert data["object"] == "text_completion"
        assert len(data["choices"][0]["text"].split()) == 4


def test_ignore_eos_gives_exactly_max_tokens(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator()
    for n in (1, 2, 33):
        body = chat_body(max_tokens=n, min_tokens=n, ignore_eos=True)
        chunks, _ = parsed(client.post(f"{sim.base_url}/v1/chat/completions", json=body).text)
        assert len(content(chunks)) == n == chunks[-1]["usage"]["completion_tokens"]


def test_min_tokens_is_honoured_without_ignore_eos(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator(seed=3)
    lengths = set()
    for _ in range(20):
        body = chat_body(max_tokens=12, min_tokens=9)
        chunks, _ = parsed(client.post(f"{sim.base_url}/v1/chat/completions", json=body).text)
        n = chunks[-1]["usage"]["completion_tokens"]
        assert 9 <= n <= 12 and len(content(chunks)) == n
        lengths.add(n)
    assert len(lengths) > 1  # drawn, not fixed


def test_prompt_tokens_equal_the_chat_template_count(
    start_simulator: StartSimulator, client: httpx.Client, qwen_dir: str
) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen_dir, local_files_only=True)
    sim = start_simulator(tokenizer=qwen_dir)
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is the capital of France? Answer in one word."},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy?"},
    ]
    rendered: Any = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    expected = rendered["input_ids"] if isinstance(rendered, Mapping) else rendered
    body = {**chat_body(max_tokens=2, ignore_eos=True), "messages": messages}
    chunks, _ = parsed(client.post(f"{sim.base_url}/v1/chat/completions", json=body).text)
    assert chunks[-1]["usage"]["prompt_tokens"] == len(expected)
    tokenized = client.post(f"{sim.base_url}/tokenize", json={"messages": messages}).json()
    assert tokenized["count"] == len(expected)


def test_streamed_words_retokenize_to_the_reported_count(
    start_simulator: StartSimulator, client: httpx.Client, qwen_dir: str
) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen_dir, local_files_only=True)
    sim = start_simulator()
    chunks, _ = parsed(
        client.post(
            f"{sim.base_url}/v1/chat/completions", json=chat_body(max_tokens=50, ignore_eos=True)
        ).text
    )
    text = "".join(content(chunks))
    assert len(tok.encode(text, add_special_tokens=False)) == 50


def test_unknown_model_is_404_json(start_simulator: StartSimulator, client: httpx.Client) -> None:
    sim = start_simulator()
    r = client.post(f"{sim.base_url}/v1/chat/completions", json=chat_body(model="other"))
    assert r.status_code == 404
    assert "other" in r.json()["error"]["message"]
    assert client.get(f"{sim.base_url}/no/such/path").json() == {"detail": "Not Found"}


def test_bad_requests_are_400(start_simulator: StartSimulator, client: httpx.Client) -> None:
    sim = start_simulator()
    url = f"{sim.base_url}/v1/chat/completions"
    assert client.post(url, content=b"{not json").status_code == 400
    assert client.post(url, json={"model": "sim-model"}).status_code == 400
    assert client.post(url, json=chat_body(max_tokens=2, min_tokens=5)).status_code == 400
    too_long = client.post(url, json=chat_body(max_tokens=40000))
    assert (
        too_long.status_code == 400
        and "maximum context length" in too_long.json()["error"]["message"]
    )


def test_startup_probes(start_simulator: StartSimulator, client: httpx.Client) -> None:
    sim = start_simulator(model="my-model", max_model_len=4096)
    assert client.get(f"{sim.base_url}/health").status_code == 200
    assert client.get(f"{sim.base_url}/ping").status_code == 200
    assert "version" in client.get(f"{sim.base_url}/version").json()
    models = client.get(f"{sim.base_url}/v1/models").json()
    assert models["object"] == "list"
    card = models["data"][0]
    assert card["id"] == "my-model" and card["max_model_len"] == 4096 and card["owned_by"] == "vllm"

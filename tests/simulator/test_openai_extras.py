"""The OpenAI surface beyond one streamed chat: n > 1, batches, logprobs, usage on every chunk."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.simulator.conftest import StartSimulator, chat_body
from tests.simulator.sse import parsed

pytestmark = pytest.mark.timeout(30)


def _by_choice(chunks: list[dict[str, Any]]) -> dict[int, list[str]]:
    texts: dict[int, list[str]] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            text = choice.get("delta", {}).get("content") or choice.get("text")
            if text:
                texts.setdefault(choice["index"], []).append(text)
    return texts


def test_n_choices_streamed_and_counted(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator()
    body = chat_body(max_tokens=4, ignore_eos=True, n=3)
    chunks, done = parsed(client.post(f"{sim.base_url}/v1/chat/completions", json=body).text)
    texts = _by_choice(chunks)
    assert done and sorted(texts) == [0, 1, 2] and all(len(t) == 4 for t in texts.values())
    assert texts[0] != texts[1]  # each choice has its own words
    roles = [
        c["choices"][0]["index"]
        for c in chunks
        if c["choices"] and "role" in c["choices"][0]["delta"]
    ]
    assert roles == [0, 1, 2]
    finishes = [ch for c in chunks for ch in c["choices"] if ch["finish_reason"]]
    assert sorted(ch["index"] for ch in finishes) == [0, 1, 2]
    assert chunks[-1]["usage"]["completion_tokens"] == 12
    (truth,) = sim.ground_truth()
    assert truth["choices"] == 3 and truth["completion_tokens"] == 12


def test_n_choices_without_ignore_eos_differ_in_length_non_streamed(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator(seed=2)
    body = chat_body(max_tokens=30, n=4, stream=False)
    data = client.post(f"{sim.base_url}/v1/chat/completions", json=body).json()
    lengths = [len(c["message"]["content"].split()) for c in data["choices"]]
    assert [c["index"] for c in data["choices"]] == [0, 1, 2, 3]
    assert len(set(lengths)) > 1 and data["usage"]["completion_tokens"] == sum(lengths)
    for choice, n in zip(data["choices"], lengths, strict=True):
        assert choice["finish_reason"] == ("length" if n == 30 else "stop")
    assert sim.ground_truth()[0]["completion_tokens"] == sum(lengths)


@pytest.mark.parametrize("prompt", [["one two", "three four five six"], [[1, 2, 3], [4] * 9]])
def test_batched_completion_prompts(
    start_simulator: StartSimulator, client: httpx.Client, prompt: list[Any]
) -> None:
    sim = start_simulator()
    body = {"prompt": prompt, "max_tokens": 3, "ignore_eos": True, "n": 2}
    data = client.post(f"{sim.base_url}/v1/completions", json=body).json()
    assert [c["index"] for c in data["choices"]] == [0, 1, 2, 3]
    assert all(len(c["text"].split()) == 3 for c in data["choices"])
    expected_prompt = 2 + 5 if isinstance(prompt[0], str) else 3 + 9  # 4-byte pieces / ids
    assert data["usage"]["prompt_tokens"] == expected_prompt
    assert data["usage"]["completion_tokens"] == 12
    (truth,) = sim.ground_truth()
    assert truth["prompt_tokens"] == expected_prompt and truth["choices"] == 4


def test_chat_logprobs_streamed_and_whole(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator()
    body = chat_body(max_tokens=3, ignore_eos=True, logprobs=True, top_logprobs=2)
    chunks, _ = parsed(client.post(f"{sim.base_url}/v1/chat/completions", json=body).text)
    entries = [
        ch["logprobs"]["content"][0] for c in chunks for ch in c["choices"] if ch.get("logprobs")
    ]
    assert [e["token"] for e in entries] == [t for t in _by_choice(chunks)[0]]
    for entry in entries:
        assert entry["logprob"] < 0 and bytes(entry["bytes"]).decode() == entry["token"]
        tops = entry["top_logprobs"]
        assert len(tops) == 2 and tops[0]["token"] == entry["token"]
        assert tops[0]["logprob"] > tops[1]["logprob"]
    whole = client.post(
        f"{sim.base_url}/v1/chat/completions", json={**body, "stream": False}
    ).json()
    content = whole["choices"][0]["logprobs"]["content"]
    assert "".join(e["token"] for e in content) == whole["choices"][0]["message"]["content"]


def test_completion_logprobs_have_offsets(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator()
    body = {"prompt": "hi", "max_tokens": 4, "ignore_eos": True, "logprobs": 3}
    choice = client.post(f"{sim.base_url}/v1/completions", json=body).json()["choices"][0]
    logprobs = choice["logprobs"]
    assert "".join(logprobs["tokens"]) == choice["text"]
    assert logprobs["text_offset"] == [
        sum(len(t) for t in logprobs["tokens"][:i]) for i in range(4)
    ]
    assert all(len(top) == 3 for top in logprobs["top_logprobs"])
    streamed, _ = parsed(
        client.post(f"{sim.base_url}/v1/completions", json={**body, "stream": True}).text
    )
    pieces = [c["choices"][0]["logprobs"] for c in streamed if c["choices"]]
    tokens = [p["tokens"][0] for p in pieces]
    assert [p["text_offset"][0] for p in pieces] == [
        sum(len(t) for t in tokens[:i]) for i in range(4)
    ]


def test_continuous_usage_stats_on_every_chunk(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator()
    options = {"include_usage": True, "continuous_usage_stats": True}
    body = chat_body(max_tokens=4, ignore_eos=True, stream_options=options)
    chunks, _ = parsed(client.post(f"{sim.base_url}/v1/chat/completions", json=body).text)
    counts = [c["usage"]["completion_tokens"] for c in chunks]
    assert counts == [0, 1, 2, 3, 4, 4]  # role chunk, four tokens, the final usage chunk
    assert all(c["usage"]["prompt_tokens"] == chunks[-1]["usage"]["prompt_tokens"] for c in chunks)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"n": 0}, "n must be a positive integer"),
        ({"n": True}, "n must be a positive integer"),
        ({"logprobs": 2}, "logprobs must be a boolean"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs must be an integer 0..20"),
        ({"top_logprobs": 2}, "top_logprobs needs logprobs: true"),
        ({"stream_options": []}, "stream_options must be an object"),
        ({"stream_options": {"continuous_usage_stats": "y"}}, "continuous_usage_stats"),
    ],
)
def test_bad_extras_are_400_naming_the_field(
    start_simulator: StartSimulator, client: httpx.Client, body: dict[str, Any], field: str
) -> None:
    sim = start_simulator()
    r = client.post(f"{sim.base_url}/v1/chat/completions", json=chat_body(**body))
    assert r.status_code == 400 and field in r.json()["error"]["message"]
    bad = {"prompt": ["a", [1]]}
    r = client.post(f"{sim.base_url}/v1/completions", json=bad)
    assert r.status_code == 400 and "prompt" in r.json()["error"]["message"]

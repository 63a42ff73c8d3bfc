"""The rest of the OpenAI surface: /v1/responses, /v1/models/{id}, /tokenize and /detokenize."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from tests.simulator.conftest import StartSimulator

pytestmark = pytest.mark.timeout(30)


def _named_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.split("\n\n"):
        if block.strip():
            name, data = block.split("\n")
            assert name.startswith("event: ") and data.startswith("data: "), block
            out.append((name[len("event: ") :], orjson.loads(data[len("data: ") :])))
    return out


def test_responses_non_streamed(start_simulator: StartSimulator, client: httpx.Client) -> None:
    sim = start_simulator()
    body = {"model": "sim-model", "input": "Hello there", "max_output_tokens": 5}
    data = client.post(f"{sim.base_url}/v1/responses", json=body).json()
    (truth,) = sim.ground_truth()
    assert data["object"] == "response" and data["id"] == truth["request_id"]
    assert data["id"].startswith("resp")
    (message,) = data["output"]
    text = message["content"][0]["text"]
    assert message["role"] == "assistant" and message["content"][0]["type"] == "output_text"
    usage = data["usage"]
    assert usage["output_tokens"] == len(text.split()) == truth["completion_tokens"]
    assert usage["input_tokens"] == truth["prompt_tokens"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    status = "incomplete" if usage["output_tokens"] == 5 else "completed"
    assert data["status"] == status and truth["path"] == "/v1/responses"


def test_responses_streamed_as_named_events(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator()
    body = {
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
        "instructions": "Be brief.",
        "max_output_tokens": 3,
        "stream": True,
    }
    r = client.post(f"{sim.base_url}/v1/responses", json=body)
    assert r.headers["content-type"].startswith("text/event-stream")
    events = _named_events(r.text)
    names = [name for name, _ in events]
    assert names[0] == "response.created" and names[-1] == "response.completed"
    deltas = [e["delta"] for name, e in events if name == "response.output_text.delta"]
    assert [e["sequence_number"] for _, e in events] == list(range(len(events)))
    final = events[-1][1]["response"]
    assert final["output"][0]["content"][0]["text"] == "".join(deltas)
    assert (
        final["usage"]["output_tokens"] == len(deltas) == sim.ground_truth()[0]["completion_tokens"]
    )
    # The instructions are a system message: a longer prompt than the input alone.
    assert final["usage"]["input_tokens"] > len("Hi")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "input"),
        ({"input": [{"role": "user", "content": 3}]}, "input[0]"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "x", "instructions": 1}, "instructions"),
    ],
)
def test_bad_responses_bodies_are_400(
    start_simulator: StartSimulator, client: httpx.Client, body: dict[str, Any], field: str
) -> None:
    sim = start_simulator()
    r = client.post(f"{sim.base_url}/v1/responses", json=body)
    assert r.status_code == 400 and field in r.json()["error"]["message"]


def test_one_model_card(start_simulator: StartSimulator, client: httpx.Client) -> None:
    sim = start_simulator(model="org/sim-model")
    card = client.get(f"{sim.base_url}/v1/models/org/sim-model").json()
    assert card == client.get(f"{sim.base_url}/v1/models").json()["data"][0]
    r = client.get(f"{sim.base_url}/v1/models/other")
    assert r.status_code == 404 and "other" in r.json()["error"]["message"]


def test_tokenize_and_detokenize_round_trip(
    start_simulator: StartSimulator, client: httpx.Client, qwen_dir: str
) -> None:
    for tokenizer in (None, qwen_dir):
        sim = start_simulator(tokenizer=tokenizer)
        text = "The simulator counts tokens, héllo."
        out = client.post(
            f"{sim.base_url}/tokenize", json={"prompt": text, "return_token_strs": True}
        ).json()
        assert out["count"] == len(out["tokens"]) == len(out["token_strs"])
        back = client.post(f"{sim.base_url}/detokenize", json={"tokens": out["tokens"]}).json()
        assert back == {"prompt": text}
        for bad in ({"tokens": []}, {"tokens": ["a"]}, {"tokens": [-1]}, [1]):
            r = client.post(f"{sim.base_url}/detokenize", json=bad)
            assert r.status_code == 400 and "tokens" in r.json()["error"]["message"]
        r = client.post(f"{sim.base_url}/tokenize", json={"prompt": "x", "return_token_strs": 1})
        assert r.status_code == 400 and "return_token_strs" in r.json()["error"]["message"]

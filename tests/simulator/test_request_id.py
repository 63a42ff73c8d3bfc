"""Joining a client's records to the truth: response ids and the echoed X-Request-ID."""

from __future__ import annotations

import httpx
import pytest

from tests.simulator.conftest import StartSimulator, chat_body
from tests.simulator.sse import parsed

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("stream", [True, False])
def test_response_id_is_the_ground_truth_id_and_the_header_is_echoed(
    start_simulator: StartSimulator, client: httpx.Client, stream: bool
) -> None:
    sim = start_simulator()
    ids = []
    for n, path in enumerate(("/v1/chat/completions", "/v1/completions")):
        body = chat_body(max_tokens=3, ignore_eos=True, stream=stream)
        if path == "/v1/completions":
            del body["messages"]
            body["prompt"] = "hello"
        r = client.post(f"{sim.base_url}{path}", json=body, headers={"X-Request-ID": f"mine-{n}"})
        assert r.status_code == 200
        assert r.headers["x-request-id"] == f"mine-{n}"
        ids.append(parsed(r.text)[0][0]["id"] if stream else r.json()["id"])
    truth = [r for r in sim.ground_truth() if r["kind"] == "request"]
    assert ids == [t["request_id"] for t in truth]
    assert [t["x_request_id"] for t in truth] == ["mine-0", "mine-1"]
    assert ids[0].startswith("chatcmpl-") and ids[1].startswith("cmpl-") and ids[0] != ids[1]


def test_errors_echo_the_header_and_no_header_means_none_echoed(
    start_simulator: StartSimulator, client: httpx.Client
) -> None:
    sim = start_simulator(faults={"error_rate": 1.0, "error_status": 503})
    r = client.post(
        f"{sim.base_url}/v1/chat/completions", json=chat_body(), headers={"X-Request-ID": "e-1"}
    )
    assert r.status_code == 503 and r.headers["x-request-id"] == "e-1"
    r = client.post(f"{sim.base_url}/v1/chat/completions", json=chat_body())
    assert r.status_code == 503 and "x-request-id" not in r.headers
    assert [t["x_request_id"] for t in sim.ground_truth()] == ["e-1", None]
    # A body refused before any generation (not logged) echoes it too.
    r = client.post(f"{sim.base_url}/v1/chat/completions", json={}, headers={"X-Request-ID": "b"})
    assert r.status_code == 400 and r.headers["x-request-id"] == "b"

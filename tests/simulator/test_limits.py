"""The counts a client controls, checked against the server's bounds before tokenizing."""

from __future__ import annotations

from typing import Any

import orjson

from inferlab_bench.simulator.body import GenerationRequest, Rejection, parse
from inferlab_bench.simulator.config import LimitsConfig, SimulatorConfig
from inferlab_bench.simulator.limits import check

CONFIG = SimulatorConfig()


def _chat(**extra: Any) -> GenerationRequest:
    body = {"model": "sim-model", "messages": [{"role": "user", "content": "hi"}], **extra}
    parsed = parse(orjson.dumps(body), chat=True)
    assert isinstance(parsed, GenerationRequest), parsed
    return parsed


def _completion(prompt: Any, **extra: Any) -> GenerationRequest:
    parsed = parse(orjson.dumps({"prompt": prompt, **extra}), chat=False)
    assert isinstance(parsed, GenerationRequest), parsed
    return parsed


def _refused(request: GenerationRequest, config: SimulatorConfig = CONFIG) -> str:
    found = check(request, config)
    assert isinstance(found, Rejection) and found.status == 400, found
    return found.message


def test_what_benchmark_clients_send_is_in_bounds() -> None:
    # AIPerf's defaults, vllm bench serve's and GuideLLM's shapes: n 1, max_tokens set or not.
    aiperf = _chat(n=1, max_tokens=1024, ignore_eos=True, stream_options={"include_usage": True})
    assert check(aiperf, CONFIG) is None
    assert check(_chat(max_completion_tokens=32768, stream=True), CONFIG) is None
    assert check(_chat(), CONFIG) is None
    assert check(_completion(list(range(30000)), max_tokens=128), CONFIG) is None
    # The largest answer the default context allows with the most logprobs.
    assert check(_chat(max_tokens=32767, logprobs=True, top_logprobs=20), CONFIG) is None


def test_n_beyond_its_bound_names_n_and_the_flag() -> None:
    assert check(_chat(n=128), CONFIG) is None
    message = _refused(_chat(n=10**6))
    assert message.startswith("n: at most 128 served, got 1000000") and "--max-n" in message


def test_max_tokens_beyond_the_context_is_refused_without_the_prompt() -> None:
    assert check(_chat(max_tokens=32768), CONFIG) is None  # a prompt of 0 tokens could fit
    assert "maximum context length is 32768" in _refused(_chat(max_tokens=10**18))


def test_answer_tokens_count_choices_cap_and_logprobs() -> None:
    message = _refused(_chat(n=128, max_tokens=32768, logprobs=True, top_logprobs=20))
    assert "88080384 tokens (choices 128 x output cap 32768 x (1 + logprobs 20))" in message
    assert "--max-answer-tokens" in message
    # Without max_tokens the cap is the server's default_max_tokens (256).
    small = SimulatorConfig(limits=LimitsConfig(max_answer_tokens=255))
    assert "output cap 256" in _refused(_chat(), small)


def test_batch_prompts_and_messages_have_their_bounds() -> None:
    assert check(_completion(["a"] * 256), CONFIG) is None
    assert "prompt (a batch): at most 256 served, got 257" in _refused(_completion(["a"] * 257))
    many = [{"role": "user", "content": "a"}] * 4097
    assert "messages: at most 4096 served, got 4097" in _refused(_chat(messages=many))


def test_every_bound_is_configurable() -> None:
    tight = SimulatorConfig(limits=LimitsConfig(max_n=2, max_prompts=1, max_messages=1))
    assert "at most 2" in _refused(_chat(n=3), tight)
    assert "at most 1" in _refused(_completion(["a", "b"]), tight)
    two = [{"role": "user", "content": "a"}] * 2
    assert "at most 1" in _refused(_chat(messages=two), tight)

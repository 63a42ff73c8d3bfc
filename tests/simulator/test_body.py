"""Parsing request bodies: what is read and what is rejected."""

from __future__ import annotations

import orjson

from inferlab_bench.simulator.body import GenerationRequest, Rejection, parse


def _parse(body: object, chat: bool = True) -> GenerationRequest | Rejection:
    return parse(orjson.dumps(body), chat=chat)


def test_chat_fields() -> None:
    req = _parse(
        {
            "messages": [{"role": "user", "content": "hi"}],
            "max_completion_tokens": 5,
            "min_tokens": 2,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
            "chat_template_kwargs": {"enable_thinking": False},
        }
    )
    assert isinstance(req, GenerationRequest)
    assert (req.sampling.max_tokens, req.sampling.min_tokens, req.sampling.ignore_eos) == (
        5,
        2,
        True,
    )
    assert req.stream and req.include_usage and req.template_kwargs == {"enable_thinking": False}


def test_rejections() -> None:
    assert isinstance(parse(b"[", chat=True), Rejection)
    assert isinstance(_parse([1]), Rejection)
    assert isinstance(_parse({"messages": []}), Rejection)
    assert isinstance(_parse({"messages": [{"role": "user"}], "max_tokens": -1}), Rejection)
    assert isinstance(_parse({"messages": [{"role": "user"}], "max_tokens": True}), Rejection)
    assert isinstance(_parse({"messages": [{"role": "user"}], "n": 0}), Rejection)
    assert isinstance(_parse({"prompt": 3}, chat=False), Rejection)


def test_completion_prompt_forms() -> None:
    assert isinstance(_parse({"prompt": "text"}, chat=False), GenerationRequest)
    req = _parse({"prompt": [1, 2, 3]}, chat=False)
    assert isinstance(req, GenerationRequest) and req.prompt == [1, 2, 3]


def test_messages_must_be_roles_with_text_content() -> None:
    for bad, says in (
        ([1], "messages[0]: an object with a string role"),
        ([{"content": "x"}], "messages[0]: an object with a string role"),
        ([{"role": "user", "content": [["x"]]}], "messages[0].content: a string or a list"),
        ([{"role": "user", "content": [{"type": "text", "text": 5}]}], "messages[0].content"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
    ):
        found = parse(orjson.dumps({"messages": bad}), chat=True)
        assert isinstance(found, Rejection) and found.status == 400, bad
        assert says in found.message, found.message

"""Segment-wise counting is exact where the shortcuts bite: added tokens in user text,
whitespace that merges with the template's own text, normalization, huge segments."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from inferlab_bench.errors import TokenizerError
from inferlab_bench.prepare.tokens.template import _Plan
from inferlab_bench.prepare.tokens.tokenize import ChatTokenizer, PrefixCounter
from tests.prepare.conftest import QWEN_DIR

TRICKY = [
    "plain words here",
    "<|im_end|>\n<|im_start|>assistant\nfake turn inside the user text",
    "half a token <|im_ and <|endoftext|> and <|im_start|",
    "\n\n  leading newlines and spaces merge with the template's newline",
    "trailing whitespace   \n\n",
    "e\u0301 combining accent (NFC composes it), ﬁ ligature, Å",
    "数据 模型 東京 こんにちは ёлка 🙂🙂🙂",
    "<think>reasoning</think>\n\nthe answer",
    "",
    " ",
]


def chats() -> list[list[dict[str, str]]]:
    out = []
    for text in TRICKY:
        out.append([{"role": "user", "content": text}])
        out.append(
            [
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": text},
                {"role": "user", "content": text or "next"},
            ]
        )
    return out


@pytest.fixture(scope="module")
def qwen() -> tuple[ChatTokenizer, Any]:
    return ChatTokenizer(QWEN_DIR), AutoTokenizer.from_pretrained(QWEN_DIR, local_files_only=True)


def reference_count(tok: Any, messages: list[dict[str, str]], **kwargs: Any) -> int:
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **kwargs)
    return len(ids["input_ids"] if hasattr(ids, "keys") else ids)


@pytest.mark.parametrize("messages", chats(), ids=lambda m: repr(m[-1]["content"][:20]))
def test_counts_equal_the_template_at_and_around_the_limit(
    qwen: tuple[ChatTokenizer, Any], messages: list[dict[str, str]]
) -> None:
    ours, reference = qwen
    exact = reference_count(reference, messages)
    for limit in (10_000, exact, exact - 1):
        assert_counted(PrefixCounter(ours)(messages, limit), exact, limit)


def assert_counted(result: int | None, exact: int, limit: int) -> None:
    """The ``CountUpTo`` contract: exact within the limit, past it when over, None only
    when the input fits (proved by an upper bound)."""
    if result is None:
        assert exact <= limit
    elif exact <= limit:
        assert result == exact
    else:
        assert result > limit


def test_whole_text_equals_added_tokens_plus_segments(qwen: tuple[ChatTokenizer, Any]) -> None:
    ours, _ = qwen
    for messages in chats():
        text = ours.render(messages)
        split = ours.split_segments(text)
        assert split is not None
        segments, added = split
        assert ours.count_texts([text]) == [added + sum(ours.count_texts(segments))]


def test_huge_segment_is_bounded_without_tokenizing(qwen: tuple[ChatTokenizer, Any]) -> None:
    ours, reference = qwen
    huge = "lorem " * 60_000
    assert ours.lower_bound(huge, 1024) > 1024
    assert ours.lower_bound(huge, 1024) <= ours.count_texts([huge])[0]
    assert ours.lower_bound("short text", 1024) == 0  # cannot matter: not computed
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": huge}]
    messages.append({"role": "user", "content": "and?"})
    assert PrefixCounter(ours)(messages, 1024) > 1024
    assert reference_count(reference, messages) > 1024


def test_non_ascii_bound_uses_normalized_bytes(qwen: tuple[ChatTokenizer, Any]) -> None:
    ours, _ = qwen
    text = "数据模型" * 40_000  # 3 bytes a character: the bound must see bytes, not characters
    bound = ours.lower_bound(text, 100)
    assert 0 < bound <= ours.count_texts([text])[0]
    assert bound >= len(text.encode()) // 128


def test_word_level_tokenizer_has_no_byte_bound(word_tokenizer: str) -> None:
    ours = ChatTokenizer(word_tokenizer, {"preamble": True})
    reference = AutoTokenizer.from_pretrained(word_tokenizer, local_files_only=True)
    messages = [{"role": "user", "content": "hello world </s> <s> one two " * 50}]
    assert ours.lower_bound("hello " * 100_000, 1) == 0
    assert ours.upper_bound("hello") is None and ours.target_at_least("hello world") == 0
    exact = reference_count(reference, messages, preamble=True)
    assert PrefixCounter(ours)(messages, 10_000) == exact  # no bound: always counted
    assert PrefixCounter(ours)(messages, exact) == exact
    assert PrefixCounter(ours)(messages, exact - 1) > exact - 1


INSPECTING_TEMPLATES = {
    "trim": "{% for m in messages %}<s> {{ m['content'] | trim }} </s>{% endfor %}",
    "tojson": "{% for m in messages %}<s> {{ m['content'] | tojson }} </s>{% endfor %}",
    "upper": "{% for m in messages %}<s> {{ m.content.upper() }} </s>{% endfor %}",
    "branches": (
        "{% for m in messages %}<s> {{ m.role }} :"
        "{% if not m.content %} [empty]{% elif 'secret' in m.content %} [redacted]"
        "{% elif m.content.startswith('!') %} command {{ m.content[1:] }}"
        "{% else %} {{ m.content }}{% endif %} </s>{% endfor %}"
        "{% if add_generation_prompt %}<s> assistant :{% endif %}"
    ),
    "length": "{% for m in messages %}{% if m.content | length > 5 %}long {% endif %}"
    "{{ m.content }} {% endfor %}",
    "shape": "{% if messages | length > 2 %}{{ raise_exception('one turn only') }}{% endif %}"
    "{% for m in messages %}{{ m.content + ' </s>' }}{% endfor %}",
}
CONTENTS = ["a b", "  a b  ", "", "secret a", "!c d", "A", "a </s> b", "é ü 数据"]


@pytest.fixture(scope="module")
def template_tokenizer(
    word_tokenizer: str, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], str]:
    """A copy of the WordLevel tokenizer with another chat template."""

    def make(template: str) -> str:
        directory = tmp_path_factory.mktemp("template")
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(Path(word_tokenizer) / name, directory / name)
        (directory / "chat_template.jinja").write_text(template)
        return str(directory)

    return make


@pytest.mark.parametrize("name", sorted(INSPECTING_TEMPLATES))
def test_renders_equal_the_template_when_it_inspects_content(
    template_tokenizer: Callable[[str], str], name: str
) -> None:
    locator = template_tokenizer(INSPECTING_TEMPLATES[name])
    ours = ChatTokenizer(locator)
    reference = AutoTokenizer.from_pretrained(locator, local_files_only=True)
    for first in CONTENTS:
        for last in CONTENTS:
            messages = [{"role": "user", "content": first}]
            if name != "shape":
                messages += [
                    {"role": "assistant", "content": last},
                    {"role": "user", "content": last},
                ]
            expected = reference.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False
            )
            assert ours.render(messages) == expected, (first, last)


def test_qwen_renders_equal_the_template(qwen: tuple[ChatTokenizer, Any]) -> None:
    ours, reference = qwen
    for messages in chats():
        expected = reference.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
        assert ours.render(messages) == expected


def test_a_plan_that_disagrees_with_a_real_render_turns_plans_off(word_tokenizer: str) -> None:
    ours = ChatTokenizer(word_tokenizer)
    ours.ready()
    plans = ours._plans
    assert plans is not None
    messages = [{"role": "user", "content": "a b"}]
    plans._plans[("user",)] = _Plan(("<s> wrong ", 0), ())
    real = AutoTokenizer.from_pretrained(word_tokenizer).apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False
    )
    assert ours.render(messages) == real
    assert ours.render([{"role": "user", "content": "c"}]).startswith("<s> user : c")
    assert plans.text(messages) is None  # off for good


@pytest.mark.parametrize(
    ("name", "planned"),
    [("branches", 5), ("shape", 8), ("trim", 0), ("tojson", 0), ("upper", 0), ("length", 0)],
)
def test_plans_serve_only_contents_that_take_the_probed_path(
    template_tokenizer: Callable[[str], str], name: str, planned: int
) -> None:
    """Escaped, stripped or measured contents get no plan; 'branches' plans the 5 contents
    that are non-empty, not 'secret' and not '!' commands, like the probes."""
    tok = ChatTokenizer(template_tokenizer(INSPECTING_TEMPLATES[name]))
    tok.ready()
    plans = tok._plans
    assert plans is not None
    shape = ["user"] if name == "shape" else ["user", "assistant", "user"]
    served = [plans.text([{"role": r, "content": c} for r in shape]) for c in CONTENTS]
    assert sum(text is not None for text in served) == planned


def test_bound_sees_bytes_after_normalization(qwen: tuple[ChatTokenizer, Any]) -> None:
    ours, _ = qwen
    decomposed = "e\u0301" * 50_000  # NFC composes each pair: 3 bytes become 2
    bound = ours.lower_bound(decomposed, 100)
    unnormalized = ours.lower_bound(decomposed.replace("e", "f"), 100)  # nothing to compose
    assert 0 < bound < unnormalized and bound * 3 == pytest.approx(unnormalized * 2, abs=3)
    assert bound <= ours.count_texts([decomposed])[0]


def test_a_load_failure_is_raised_at_first_use(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    tok = ChatTokenizer(str(tmp_path))  # loading runs in the background
    with pytest.raises(TokenizerError, match="cannot load a tokenizer"):
        tok.count_texts(["a"])

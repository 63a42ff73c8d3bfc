"""Materialization rules with real tokenizers: every reason, rollback, ids, lengths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from inferlab_bench.prepare.materialize import Reason, parse_conversation
from inferlab_bench.prepare.stage import run_prepare
from inferlab_bench.protocol import BenchDatasetPreparationResult
from tests.prepare.conftest import QWEN_DIR, convo, prep_request, turn


def evidence(result: BenchDatasetPreparationResult) -> list[dict[str, Any]]:
    assert result.evidence_path is not None
    return [json.loads(line) for line in Path(result.evidence_path).read_text().splitlines()]


def population(result: BenchDatasetPreparationResult) -> list[dict[str, Any]]:
    assert result.population is not None
    return [json.loads(line) for line in Path(result.population.path).read_text().splitlines()]


def qwen_count(messages: list[dict[str, str]]) -> int:
    tok = AutoTokenizer.from_pretrained(QWEN_DIR, local_files_only=True)
    return len(
        tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"]
    )


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({"conversations": "nope"}, Reason.INVALID_CONVERSATION),
        ({"id": "a"}, Reason.INVALID_CONVERSATION),
        ({"conversations": [turn("gpt", "hi"), turn("human", "yo")]}, Reason.INVALID_CONVERSATION),
        ({"conversations": [turn("human", "a"), turn("system", "b")]}, Reason.INVALID_CONVERSATION),
        ({"conversations": [turn("human", "a"), turn("human", "b")]}, Reason.INVALID_CONVERSATION),
        ({"conversations": [turn("human", "a"), turn("gpt", 5)]}, Reason.INVALID_CONVERSATION),
        ({"conversations": [turn("human", "a"), turn("bing", "b")]}, Reason.INVALID_CONVERSATION),
        ({"conversations": []}, Reason.MISSING_ASSISTANT_TARGET),
        ({"conversations": [turn("human", "a")]}, Reason.MISSING_ASSISTANT_TARGET),
        (convo("a", "b", "c"), Reason.MISSING_ASSISTANT_TARGET),
    ],
)
def test_structural_reasons(record: dict[str, Any], reason: Reason) -> None:
    assert parse_conversation(0, record) == reason


def test_every_reason_is_counted_over_the_whole_file(dataset: Any, tmp_path: Path) -> None:
    long = "word " * 3000
    records = [
        convo("hello there", "general kenobi and more words"),  # admitted
        convo("héllo wörld 数据", "ça va très bien, merci 東京"),  # admitted, non-ASCII
        {"conversations": [turn("gpt", "x"), turn("human", "y")]},  # invalid
        convo("only a question"),  # missing target
        convo(long, "answer"),  # exceeds
        convo("question", "   "),  # empty target
        convo("question", "ok"),  # 1-token target
    ]
    source, catalog = dataset(records)
    result = run_prepare(
        prep_request(source, catalog, tmp_path / "out", max_input=512), catalog_dir=catalog
    )
    assert result.status.value == "succeeded", result.error
    assert result.candidate_entries == 7 and result.admitted_entries == 2
    assert result.ineligible_entries == 5
    assert result.ineligible_reasons == {
        "assistant_target_shorter_than_two_tokens": 1,
        "empty_assistant_target": 1,
        "input_exceeds_maximum": 1,
        "invalid_conversation": 1,
        "missing_assistant_target": 1,
    }
    texts = {entry["messages"][0]["content"] for entry in population(result)}
    assert texts == {"hello there", "héllo wörld 数据"}
    raw = Path(result.population.path).read_bytes()  # type: ignore[union-attr]
    assert "héllo wörld 数据".encode() in raw  # UTF-8 as is, not \\u-escaped


def test_rollback_steps_back_whole_exchanges(dataset: Any, tmp_path: Path) -> None:
    long = "filler " * 800
    records = [
        convo("first question", "first answer here", long, "second answer", "q3", "a3", id="r")
    ]
    source, catalog = dataset(records)
    result = run_prepare(
        prep_request(source, catalog, tmp_path / "o", required=1, max_input=200),
        catalog_dir=catalog,
    )
    assert result.status.value == "succeeded", result.error
    [entry] = evidence(result)
    assert entry["messages"] == [{"role": "user", "content": "first question"}]
    assert entry["target"] == "first answer here"
    assert entry["kept_messages"] == 1 and entry["removed_messages"] == 5
    assert entry["input_tokens"] == qwen_count(entry["messages"])


def test_blank_last_user_message_steps_back(dataset: Any, tmp_path: Path) -> None:
    records = [convo("real question", "real answer text", "   ", "answer to blank")]
    source, catalog = dataset(records)
    result = run_prepare(
        prep_request(source, catalog, tmp_path / "o", required=1), catalog_dir=catalog
    )
    [entry] = evidence(result)
    assert entry["target"] == "real answer text" and entry["kept_messages"] == 1


def test_longest_fitting_input_is_kept_and_counted_exactly(dataset: Any, tmp_path: Path) -> None:
    records = [convo("q1 text", "a1 text", "q2 text", "a2 text here", id="k")]
    source, catalog = dataset(records)
    result = run_prepare(
        prep_request(source, catalog, tmp_path / "o", required=1), catalog_dir=catalog
    )
    [entry] = evidence(result)
    assert entry["kept_messages"] == 3 and entry["target"] == "a2 text here"
    assert entry["input_tokens"] == qwen_count(entry["messages"])
    assert result.input_tokens is not None and result.input_tokens.minimum == entry["input_tokens"]


def test_missing_ids_become_row_numbers(dataset: Any, tmp_path: Path) -> None:
    records = [convo("a question", "an answer", id=None), convo("b question", "b answer", id=None)]
    source, catalog = dataset(records)
    result = run_prepare(prep_request(source, catalog, tmp_path / "o"), catalog_dir=catalog)
    assert sorted(e["source_id"] for e in evidence(result)) == ["row-0", "row-1"]


def test_fixed_output_tokens_override_target_length(dataset: Any, tmp_path: Path) -> None:
    records = [convo("question one", "ok"), convo("question two", "a much longer answer text")]
    source, catalog = dataset(records)
    fixed = run_prepare(
        prep_request(source, catalog, tmp_path / "f", output_tokens=7), catalog_dir=catalog
    )
    assert fixed.admitted_entries == 2  # the 1-token target is fine with a fixed length
    assert {p["output_length"] for p in population(fixed)} == {7}
    assert all(p["extra"] == {"ignore_eos": True, "min_tokens": 7} for p in population(fixed))
    natural = run_prepare(
        prep_request(source, catalog, tmp_path / "n", required=1), catalog_dir=catalog
    )
    [entry] = evidence(natural)
    assert population(natural)[0]["output_length"] == entry["target_tokens"] > 2
    assert natural.population is not None and natural.population.tpot_applicable


def test_population_line_format(dataset: Any, tmp_path: Path) -> None:
    source, catalog = dataset([convo("say hi", "hi there friend")])
    result = run_prepare(
        prep_request(source, catalog, tmp_path / "o", required=1), catalog_dir=catalog
    )
    line = Path(result.population.path).read_bytes()  # type: ignore[union-attr]
    n = population(result)[0]["output_length"]
    assert line == (
        b'{"extra":{"ignore_eos":true,"min_tokens":%d},'
        b'"messages":[{"content":"say hi","role":"user"}],'
        b'"output_length":%d,"session_id":"inferlab-00000000"}\n' % (n, n)
    )
    sha = (tmp_path / "o" / "population.sha256").read_text().split()[0]
    assert sha == result.population.sha256  # type: ignore[union-attr]


def test_fewer_admitted_than_required_fails_with_counts(dataset: Any, tmp_path: Path) -> None:
    source, catalog = dataset([convo("q", "a long enough answer"), convo("only question")])
    result = run_prepare(
        prep_request(source, catalog, tmp_path / "o", required=5), catalog_dir=catalog
    )
    assert result.status.value == "failed"
    assert result.error is not None and "5 needed, only 1 admitted" in result.error
    assert (result.candidate_entries, result.admitted_entries, result.ineligible_entries) == (
        2,
        1,
        1,
    )
    assert result.population is None
    assert not (tmp_path / "o" / "population.jsonl").exists()


def test_chat_template_kwargs_change_counts(
    dataset: Any, tmp_path: Path, word_tokenizer: str
) -> None:
    source, catalog = dataset([convo("hello world", "one two three")])
    plain = run_prepare(
        prep_request(source, catalog, tmp_path / "p", locator=word_tokenizer, required=1),
        catalog_dir=catalog,
    )
    with_kw = run_prepare(
        prep_request(
            source,
            catalog,
            tmp_path / "k",
            locator=word_tokenizer,
            required=1,
            request_body={"chat_template_kwargs": {"preamble": True}},
        ),
        catalog_dir=catalog,
    )
    assert plain.status.value == with_kw.status.value == "succeeded", (plain.error, with_kw.error)
    a, b = evidence(plain)[0]["input_tokens"], evidence(with_kw)[0]["input_tokens"]
    assert b == a + 5  # "system: be brief and exact": five whitespace-split words
    assert evidence(plain)[0]["target_tokens"] == 3


def test_bad_chat_template_kwargs_type(dataset: Any, tmp_path: Path) -> None:
    source, catalog = dataset([convo("q", "answer text")])
    result = run_prepare(
        prep_request(source, catalog, tmp_path / "o", request_body={"chat_template_kwargs": 3}),
        catalog_dir=catalog,
    )
    assert result.status.value == "failed" and "chat_template_kwargs" in (result.error or "")


def test_unloadable_tokenizer_is_a_clear_failure(dataset: Any, tmp_path: Path) -> None:
    source, catalog = dataset([convo("q", "answer text")])
    result = run_prepare(
        prep_request(source, catalog, tmp_path / "o", locator=str(tmp_path / "nope")),
        catalog_dir=catalog,
    )
    assert result.status.value == "failed"
    assert "model.locator" in (result.error or "") and "local tokenizer directory" in (
        result.error or ""
    )

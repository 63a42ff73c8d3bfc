"""Conversation populations (``sharegpt-multi-turn-v1``): the session rules, per-turn counts and
reusable prefixes against ``apply_chat_template`` on real text, determinism, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from inferlab_bench.prepare.materialize import Reason, parse_conversation
from inferlab_bench.prepare.sessions import (
    MATERIALIZATION_IDENTITY,
    Session,
    SessionReason,
    choose_session,
    reusable_prefix,
)
from inferlab_bench.prepare.sessionscan import scan, shared_prefixes
from inferlab_bench.prepare.sharegpt import read_records
from inferlab_bench.prepare.stage import run_prepare
from inferlab_bench.prepare.tokens.tokenize import ChatTokenizer
from inferlab_bench.protocol import BenchDatasetPreparationRequest, ClientStatus
from tests.prepare.conftest import QWEN_DIR, REAL_SAMPLE, convo, prep_request

REAL_17671 = Path.home() / ".cache" / "inferlab-reference" / "sharegpt" / "sharegpt_real_17671.json"


def sessions_request(
    source: Path, catalog: Path, out: Path, **kwargs: Any
) -> BenchDatasetPreparationRequest:
    """A v6 request whose catalog names the conversation materialization (the catalog file
    itself stays the single-request one: ours is an extension of it)."""
    request = prep_request(source, catalog, out, **kwargs)
    data = json.loads(request.model_dump_json())
    data["request_source"]["catalog"]["materialization_identity"] = MATERIALIZATION_IDENTITY
    return BenchDatasetPreparationRequest.model_validate_json(json.dumps(data))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- pure rules -------------------------------------------------------------------------


def by_words(messages: list[dict[str, str]], limit: int) -> int:
    """A stand-in count for the pure rules: one token per word of every message."""
    return sum(len(m["content"].split()) for m in messages)


def parsed(*pairs: str) -> Any:
    conversation = parse_conversation(0, convo(*pairs))
    assert not isinstance(conversation, Reason)
    return conversation


def test_a_conversation_too_long_after_turn_k_gives_k_turns() -> None:
    long = " ".join(["w"] * 50)
    conversation = parsed("q one", "a one", "q two", "a two", long, "a three", "q", "a")
    session = choose_session(conversation, by_words, lambda t: None, 20)
    assert session == Session(2, (2, 6), Reason.INPUT_EXCEEDS_MAXIMUM.value)
    everything = choose_session(conversation, by_words, lambda t: None, 1000)
    assert isinstance(everything, Session) and everything.turns == 4
    assert everything.stopped_by is None


def test_sessions_need_two_turns_and_stop_at_the_first_bad_turn() -> None:
    check = lambda t: None  # noqa: E731
    one = choose_session(parsed("q", "a"), by_words, check, 100)
    assert one == SessionReason.FEWER_THAN_TWO_TURNS.value
    blank_user = choose_session(parsed("q", "a", "  ", "b", "q", "c"), by_words, check, 100)
    assert blank_user == SessionReason.EMPTY_USER_MESSAGE.value
    blank_target = choose_session(parsed("q", "a", "q2", " ", "q3", "c"), by_words, check, 100)
    assert blank_target == Reason.EMPTY_ASSISTANT_TARGET.value
    short = choose_session(
        parsed("q", "a", "q2", "b", "q3", "x"),
        by_words,
        lambda t: Reason.TARGET_SHORTER_THAN_TWO_TOKENS if t == "x" else None,
        100,
    )
    assert isinstance(short, Session) and short.turns == 2
    assert short.stopped_by == Reason.TARGET_SHORTER_THAN_TWO_TOKENS.value
    proved = choose_session(parsed("q", "a", "q2", "b"), lambda m, n: None, check, 100)
    assert proved == Session(2, (None, None), None)


def test_reusable_prefix_is_the_shared_leading_tokens() -> None:
    assert reusable_prefix([1, 2, 3, 4], [1, 2, 3, 9, 9]) == 3
    assert reusable_prefix([1, 2], [1, 2, 3]) == 2
    assert reusable_prefix([], [1]) == 0
    assert reusable_prefix([5], [1, 5]) == 0


# --- real text, real tokenizers ---------------------------------------------------------


def _ids(tok: Any, messages: list[dict[str, str]], *, prompt: bool) -> list[int]:
    encoded = tok.apply_chat_template(messages, add_generation_prompt=prompt, tokenize=True)
    if not isinstance(encoded, list):
        encoded = encoded["input_ids"]
    return list(encoded)


@pytest.mark.parametrize("locator", ["qwen2", "llama3", "gpt2", "word-fallback"], indirect=True)
def test_turn_counts_and_reusable_prefix_equal_the_template_on_real_text(
    locator: str, dataset: Any, tmp_path: Path
) -> None:
    _check_against_the_template(json.loads(REAL_SAMPLE.read_text()), locator, dataset, tmp_path)


@pytest.mark.skipif(
    not REAL_17671.is_file(), reason="../shared/tools/real-sharegpt has not written the file"
)
@pytest.mark.parametrize("locator", ["qwen2", "gpt2"], indirect=True)
def test_the_same_on_a_slice_of_the_real_17671(locator: str, dataset: Any, tmp_path: Path) -> None:
    records = json.loads(REAL_17671.read_bytes())[5000:5400]
    _check_against_the_template(records, locator, dataset, tmp_path, sessions=20)


def _check_against_the_template(
    records: list[Any], locator: str, dataset: Any, tmp_path: Path, sessions: int = 8
) -> None:
    """Every turn's line and evidence of a conversation population prepared from
    ``records`` against ``apply_chat_template(tokenize=True)`` and the records."""
    source, catalog = dataset(records)
    out = tmp_path / "out"
    out.mkdir()
    request = sessions_request(
        source, catalog, out, locator=locator, required=sessions, max_input=1024
    )
    result = run_prepare(request, catalog_dir=catalog)
    assert result.status is ClientStatus.SUCCEEDED, result.error
    assert result.materialization_identity == MATERIALIZATION_IDENTITY
    population, evidence = lines(out / "population.jsonl"), lines(out / "population-evidence.jsonl")
    assert result.population is not None and result.population.entries == len(population)
    assert len(population) == len(evidence) >= 2 * sessions  # at least 2 turns each
    tok = AutoTokenizer.from_pretrained(locator)
    seen: list[str] = []
    previous_context: list[int] = []
    before_turn = -1
    for position, (line, facts) in enumerate(zip(population, evidence, strict=True)):
        assert facts["position"] == position and line["session_id"] == facts["session_id"]
        if facts["turn"] == 0:
            assert facts["session_id"] == f"inferlab-{len(seen):08d}"
            seen.append(facts["session_id"])
        else:
            assert facts["session_id"] == seen[-1]  # consecutive, in turn order
            assert facts["turn"] == before_turn + 1
        messages = line["messages"]
        assert len(messages) == 2 * facts["turn"] + 1 and messages[-1]["role"] == "user"
        assert set(line) == {"extra", "messages", "output_length", "session_id"}  # no delay
        assert line["output_length"] == facts["output_tokens"] == facts["target_tokens"]
        assert line["extra"] == {"ignore_eos": True, "min_tokens": facts["output_tokens"]}
        current = _ids(tok, messages, prompt=True)
        assert facts["input_tokens"] == len(current) <= 1024
        expected = reusable_prefix(previous_context, current) if facts["turn"] else 0
        assert facts["reusable_prefix_tokens"] == expected
        record = records[facts["index"]]["conversations"]
        reply = record[2 * facts["turn"] + 1]["value"]
        context = [*messages, {"role": "assistant", "content": reply}]
        previous_context = _ids(tok, context, prompt=False)
        before_turn = facts["turn"]
        assert facts["target_tokens"] == len(tok(reply, add_special_tokens=False)["input_ids"])
    assert len(seen) == sessions
    for before, facts in zip(evidence, evidence[1:], strict=False):
        if facts["turn"] == 0:
            continue
        if locator == QWEN_DIR:
            # Qwen3's template renders the latest reply after an empty think block, and
            # earlier replies without it: only the previous input is reusable.
            assert facts["reusable_prefix_tokens"] == before["input_tokens"]
        else:
            reply = before["input_tokens"] + before["target_tokens"]
            assert facts["reusable_prefix_tokens"] >= reply


def test_a_long_middle_turn_ends_the_session_before_it(dataset: Any, tmp_path: Path) -> None:
    long = "word " * 3000
    records = [
        convo("first question", "first answer here", "second one", "second answer", id="a"),
        convo("q", "an answer", "q two", "another answer", long, "x y z", "q", "ok ok", id="b"),
    ]
    source, catalog = dataset(records)
    out = tmp_path / "out"
    out.mkdir()
    result = run_prepare(sessions_request(source, catalog, out, required=2), catalog_dir=catalog)
    assert result.status is ClientStatus.SUCCEEDED, result.error
    turns = {}
    for facts in lines(out / "population-evidence.jsonl"):
        turns[facts["source_id"]] = facts["turn"] + 1
    assert turns == {"a": 2, "b": 2}


def test_population_is_byte_identical_across_runs_worker_counts_and_the_scan_cache(
    dataset: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, catalog = dataset(json.loads(REAL_SAMPLE.read_text()))
    digests, manifests = [], []
    for run in range(2):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / f"cache-{run}"))
        out = tmp_path / f"out-{run}"
        out.mkdir()
        result = run_prepare(
            sessions_request(source, catalog, out, required=10, seed=7), catalog_dir=catalog
        )
        assert result.population is not None, result.error
        digests.append((out / "population.jsonl").read_bytes())
        digests.append((out / "population-evidence.jsonl").read_bytes())
        manifests.append(json.loads((out / "preparation-manifest.json").read_text()))
    assert digests[0] == digests[2] and digests[1] == digests[3]
    assert manifests[0]["materialization_identity"] == MATERIALIZATION_IDENTITY
    assert manifests[0]["population_sha256"] == manifests[1]["population_sha256"]
    assert (
        (tmp_path / "out-0" / "population.sha256")
        .read_text()
        .startswith(manifests[0]["population_sha256"])
    )
    records = read_records(source).records
    one = scan(records, ChatTokenizer(QWEN_DIR), 1024, None, workers=1)
    two = scan(records, ChatTokenizer(QWEN_DIR), 1024, None, workers=2)
    assert one == two and any(r.reason is None for r in one)

    def again(name: str, cache: str, seed: int) -> tuple[bytes, bool]:
        """A run in an existing (or new) cache: its population and whether it read the scan."""
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / cache))
        out = tmp_path / name
        out.mkdir()
        request = sessions_request(source, catalog, out, required=10, seed=seed)
        result = run_prepare(request, catalog_dir=catalog)
        assert result.population is not None, result.error
        manifest = json.loads((out / "preparation-manifest.json").read_text())
        return (out / "population.jsonl").read_bytes(), manifest["session_scan_cache_hit"]

    assert manifests[1]["session_scan_cache_hit"] is False
    assert again("warm", "cache-1", 7) == (digests[0], True)
    warm_other = again("warm-other", "cache-1", 8)
    assert warm_other[1] is True and warm_other[0] != digests[0]
    assert again("cold-other", "cache-2", 8) == (warm_other[0], False)
    for damaged in (tmp_path / "cache-1").rglob("*.json"):
        if damaged.parent.name == "session-scans":
            damaged.write_bytes(b'{"source_format": "json-array", "rows": [[1, 2]]}')
    assert again("rescanned", "cache-1", 7) == (digests[0], False)


@pytest.mark.parametrize("locator", ["qwen2", "llama3", "gpt2", "word-fallback"], indirect=True)
def test_shared_prefixes_by_pieces_equal_whole_encodes(locator: str) -> None:
    tok = ChatTokenizer(locator)
    texts = [
        m["value"] for r in json.loads(REAL_SAMPLE.read_text())[:12] for m in r["conversations"]
    ]
    marks = ["<|im_start|>", "<|im_end|>", "<|eot_id|>", "<s>", "</s>", "<think>", "\n\n"]
    pairs = []
    for i, text in enumerate(texts):
        cut = text[: len(text) // 2]
        mark = marks[i % len(marks)]
        other = marks[(i + 1) % len(marks)]
        pairs += [
            (text, text),
            (cut, text),  # one text a prefix of the other: ids agree to the shorter's end
            (text, cut),
            (cut + mark + "tail one", cut + mark + "tail two"),
            (cut + mark, cut + other + text),
            (mark + cut, mark + cut + " " + mark),
            (cut + mark + cut + other, cut + mark + cut + other + "x"),
            ("", text),
            # Different texts, the same ids (NFC) while both go on: encoded whole.
            ("\u00e9" + mark + "x" + other + "y", "e\u0301" + mark + "x" + other + "z"),
        ]
    ids = tok.encode_ids([t for pair in pairs for t in pair])
    expected = [reusable_prefix(ids[2 * i], ids[2 * i + 1]) for i in range(len(pairs))]
    assert shared_prefixes(tok, pairs) == expected


# --- bad input --------------------------------------------------------------------------


def test_an_unknown_materialization_fails_naming_the_field(dataset: Any, tmp_path: Path) -> None:
    source, catalog = dataset([convo("q", "a", "q2", "b")])
    out = tmp_path / "out"
    out.mkdir()
    request = prep_request(source, catalog, out)
    data = json.loads(request.model_dump_json())
    data["request_source"]["catalog"]["materialization_identity"] = "sharegpt-multi-turn-v9"
    bad = BenchDatasetPreparationRequest.model_validate_json(json.dumps(data))
    result = run_prepare(bad, catalog_dir=catalog)
    assert result.status is ClientStatus.FAILED
    assert result.error is not None
    assert result.error.startswith("catalog.materialization_identity: request has")
    assert "sharegpt-multi-turn-v9" in result.error


def test_too_few_sessions_fail_with_the_census(dataset: Any, tmp_path: Path) -> None:
    source, catalog = dataset([convo("q", "a one", "q2", "b two"), convo("q", "only one")])
    out = tmp_path / "out"
    out.mkdir()
    result = run_prepare(sessions_request(source, catalog, out, required=2), catalog_dir=catalog)
    assert result.status is ClientStatus.FAILED
    assert result.error is not None and result.error.startswith(
        "required_entries: 2 needed, only 1 admitted"
    )
    assert result.ineligible_reasons == {"fewer_than_two_turns": 1}
    assert not (out / "population.jsonl").exists()


def test_the_command_line_prepares_sessions(dataset: Any, tmp_path: Path) -> None:
    source, _ = dataset(json.loads(REAL_SAMPLE.read_text()))
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "inferlab_bench",
            "prepare",
            "--model",
            QWEN_DIR,
            "--dataset",
            str(source),
            "--entries",
            "3",
            "--max-input-tokens",
            "1024",
            "--sessions",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "sessions of 61 conversations" in done.stdout
    recorded = json.loads((out / "prepare-result.json").read_text())
    assert recorded["materialization_identity"] == MATERIALIZATION_IDENTITY
    evidence = lines(out / "population-evidence.jsonl")
    assert len({f["session_id"] for f in evidence}) == 3
    assert recorded["population"]["entries"] == len(evidence)
    saved = json.loads((out / "prepare-request.json").read_text())
    assert saved["request_source"]["catalog"]["materialization_identity"] == (
        MATERIALIZATION_IDENTITY
    )
    # The saved v6 request replays in JSON mode to the same bytes.
    saved["artifact_dir"] = str(tmp_path / "replay")
    (tmp_path / "replay").mkdir()
    (tmp_path / "replay.json").write_text(json.dumps(saved))
    replay = subprocess.run(
        [
            *(sys.executable, "-m", "inferlab_bench", "prepare"),
            *("--input", str(tmp_path / "replay.json"), "--output", str(tmp_path / "r.json")),
            *("--catalog-dir", str(out / "catalog")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert replay.returncode == 0, replay.stderr
    replayed = json.loads((tmp_path / "r.json").read_text())
    assert replayed["population"]["sha256"] == recorded["population"]["sha256"]

"""On real ShareGPT text and three tokenizers (plus one without proved bounds), deciding by
bounds gives exactly what counting every candidate gives: census, chosen entries, bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from inferlab_bench.prepare.stage import run_prepare
from inferlab_bench.prepare.tokens.tokenize import ChatTokenizer
from inferlab_bench.prepare.tokentable import TokenTable
from inferlab_bench.prepare.write import Entry, population_bytes
from tests.prepare.conftest import REAL_SAMPLE, convo, prep_request
from tests.prepare.reference import reference_select

ADVERSARIAL = [
    "emoji 🙂🙂🙂 👩‍👩‍👧‍👦 flags 🇫🇷🇯🇵 and skin tones 👍🏽👍🏿",
    "数据模型的输入和输出。こんにちは世界、カタカナ。한국어 문장입니다.",
    "combining e\u0301 a\u0308 o\u0302\u0323 n\u0303 and <\u0338 =\u0338 and Z\u0335\u0321\u0354",
    "digits 3141592653589793238462643383279502884197169399375105820974944 end",
    " " * 300 + "spaces\t\t\t\ttabs\n\n\n\n\nnewlines" + "\u3000" * 40,
    "looks special <|im_start|> <|im_end|> <|eot_id|> <|endoftext|> <|im_end <s> </s>",
    "<|im_end|><|im_end|><|eot_id|>",
    "ﬁ ligatures ½ ⑴ Ｆｕｌｌ\u212a x² ١٢٣",
    "a",
    "ok",
]


def _records() -> list[Any]:
    records: list[Any] = json.loads(REAL_SAMPLE.read_text())
    for i, text in enumerate(ADVERSARIAL):
        records.append(convo(text, text, id=f"adv-{i}"))
        records.append(convo("question", "answer", text, f"reply {i}: " + text, id=f"adv2-{i}"))
        records.append(convo(text * 40, "answer", "short?", text, id=f"adv3-{i}"))
    records.append(convo("question", "   ", id="blank-target"))
    records.append(convo("question", "\u200b", id="zero-width-target"))
    return records


TOKENIZERS = ["qwen2", "llama3", "gpt2", "word-fallback"]


@pytest.mark.parametrize("locator", TOKENIZERS, indirect=True)
@pytest.mark.parametrize(("max_input", "output_tokens"), [(128, None), (512, 16)])
def test_bounds_decide_as_exact_counting_does(
    locator: str,
    dataset: Any,
    tmp_path: Path,
    isolated_cache: Path,
    max_input: int,
    output_tokens: int | None,
) -> None:
    records = _records()
    source, catalog = dataset(records)
    outcomes = []
    for seed in (3, 4):  # the second is warm: its newly chosen entries are counted then
        out = tmp_path / f"o{seed}"
        request = prep_request(
            source,
            catalog,
            out,
            locator=locator,
            required=8,
            max_input=max_input,
            output_tokens=output_tokens,
            seed=seed,
        )
        ours = run_prepare(request, catalog_dir=catalog)
        assert ours.status.value == "succeeded", ours.error
        tok = AutoTokenizer.from_pretrained(locator, local_files_only=True)
        ref = reference_select(
            records,
            tok,
            seed=seed,
            required=8,
            max_input_tokens=max_input,
            output_tokens=output_tokens,
        )
        assert ours.ineligible_reasons == ref["reasons"]
        assert ours.admitted_entries == ref["admitted"]
        assert ours.candidate_entries == len(records)
        evidence = [json.loads(line) for line in (out / "population-evidence.jsonl").open()]
        assert [e["index"] for e in evidence] == [i for _, i, _, _ in ref["chosen"]]
        assert [e["input_tokens"] for e in evidence] == [
            o["input_tokens"] for *_, o in ref["chosen"]
        ]
        entries = [
            Entry(i, sid, o["messages"], o["target"], 0, o["input_tokens"], 0, o["output_length"])
            for _, i, sid, o in ref["chosen"]
        ]
        assert Path(ours.population.path).read_bytes() == population_bytes(entries)  # type: ignore[union-attr]
        outcomes.append(json.loads((out / "preparation-manifest.json").read_text()))
    assert [m["token_table_cache_hit"] for m in outcomes] == [False, True]
    (path,) = (isolated_cache / "inferlab" / "token-tables").glob("*.table")
    table = TokenTable.from_bytes(path.read_bytes())
    rows = [
        (table.input_tokens[p], table.target_tokens[p])
        for p, reason in enumerate(table.reason)
        if reason is None
    ]
    uncounted = sum(-1 in row for row in rows)
    if "word-tokenizer" in locator:
        assert uncounted == 0, [row for row in rows if -1 in row]
    else:
        assert uncounted > 0  # some decisions were left to bounds


@pytest.mark.parametrize("locator", TOKENIZERS[:3], indirect=True)
def test_each_bound_holds_against_the_exact_count(locator: str) -> None:
    tok = ChatTokenizer(locator)
    texts = [t["value"] for r in json.loads(REAL_SAMPLE.read_text()) for t in r["conversations"]]
    texts += ADVERSARIAL + [a * 30 for a in ADVERSARIAL]
    pieces = []
    for text in texts:
        split = tok.split_segments(text)
        assert split is not None
        pieces += split[0]
    counts = tok.count_texts(pieces)
    for piece, count in zip(pieces, counts, strict=True):
        upper = tok.upper_bound(piece)
        assert upper is not None
        assert tok.lower_bound(piece, 0) <= count <= upper, piece[:80]
    for text, count in zip(texts, tok.count_texts(texts), strict=True):
        assert tok.target_at_least(text) <= count, text[:80]


def test_a_wrong_bound_fails_the_preparation_instead_of_freezing_it(
    dataset: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were a bound ever wrong, the chosen entries' exact counts contradict it: the result
    fails, naming the record and the counts, rather than describing another census."""
    records = [convo("7" * 150, "an answer of several words", id=f"c{i}") for i in range(3)]
    source, catalog = dataset(records)
    monkeypatch.setattr(ChatTokenizer, "upper_bound", lambda self, segment: 1)
    request = prep_request(source, catalog, tmp_path / "o", required=2, max_input=64)
    result = run_prepare(request, catalog_dir=catalog)
    assert result.status.value == "failed"
    assert "contradict the bound that admitted it" in (result.error or "")
    assert "of at most 64" in (result.error or "") and "record " in (result.error or "")
    assert not (tmp_path / "o" / "population.jsonl").exists()

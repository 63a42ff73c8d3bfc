"""The kept tokenizer (``tokens.store``) counts and renders exactly as AutoTokenizer does."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from inferlab_bench.prepare.materialize import Conversation, parse_conversation
from inferlab_bench.prepare.stage import run_prepare
from inferlab_bench.prepare.tokens import ChatTokenizer, fingerprint, pretoken, store
from inferlab_bench.prepare.tokens.pretoken import WordMemory
from tests.prepare.conftest import QWEN_DIR, REAL_SAMPLE, convo, prep_request
from tests.prepare.test_equivalence_real import ADVERSARIAL, TOKENIZERS

REPO = Path(__file__).resolve().parents[3]


def _chats() -> list[list[dict[str, str]]]:
    """Every candidate input of the real sample and of adversarial conversations."""
    records = json.loads(REAL_SAMPLE.read_text())
    records += [convo(t, t, "again " + t, t, id=f"adv-{i}") for i, t in enumerate(ADVERSARIAL)]
    chats = []
    for i, record in enumerate(records):
        conversation = parse_conversation(i, record)
        if isinstance(conversation, Conversation):
            chats += [conversation.chat(end) for end in range(1, len(conversation.messages), 2)]
    return chats


def _kept(locator: str, kwargs: dict[str, Any] | None = None) -> tuple[ChatTokenizer, Any]:
    """Keep the real tokenizer after rendering every chat through it (which verifies the
    plans), and read it back."""
    real = ChatTokenizer(locator, kwargs)
    for chat in _chats():
        real.render(chat)
    store.save(real, fingerprint(locator))
    kept = store.load(locator, kwargs or {}, fingerprint(locator))
    assert kept is not None
    return kept, real


@pytest.mark.parametrize("locator", TOKENIZERS, indirect=True)
def test_the_kept_tokenizer_counts_as_autotokenizer(locator: str) -> None:
    kept, real = _kept(locator)
    auto = AutoTokenizer.from_pretrained(locator, local_files_only=True)
    assert kept.transformers_tokenizer is None  # read without transformers
    assert kept.added_tokens == real.added_tokens
    assert kept._backend.to_str() == auto.backend_tokenizer.to_str()
    saved = json.loads(store.backend_path(fingerprint(locator)).read_text())["model"]
    assert all(isinstance(m, str) for m in saved.get("merges", []))  # the faster form
    texts = [m["content"] for chat in _chats() for m in chat]
    texts += [real.render(chat) for chat in _chats()]
    texts += ADVERSARIAL + [a * 30 for a in ADVERSARIAL]
    expected = [len(auto(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert kept.count_texts(texts) == expected
    assert [len(e) for e in kept._backend.encode_batch(texts, add_special_tokens=False)] == (
        expected
    )


@pytest.mark.parametrize("locator", TOKENIZERS, indirect=True)
def test_kept_plans_render_as_apply_chat_template(locator: str) -> None:
    kwargs = {"preamble": True} if "word-tokenizer" in locator else {}
    kept, _ = _kept(locator, kwargs)
    auto = AutoTokenizer.from_pretrained(locator, local_files_only=True)
    planned = 0
    for chat in _chats():
        text = kept.planned(chat)
        if text is not None:
            planned += 1
            assert text == auto.apply_chat_template(
                chat, add_generation_prompt=True, tokenize=False, **kwargs
            )
    if "llama3" in locator:
        assert planned == 0  # its template trims contents: no plans, so always real renders
    else:
        assert planned > 0.9 * len(_chats())


def test_a_damaged_or_foreign_store_is_not_used(isolated_cache: Path) -> None:
    kept, _ = _kept(QWEN_DIR)
    print_ = fingerprint(QWEN_DIR)
    facts = store.facts_path(print_, {})
    assert store.load(QWEN_DIR, {"other": 1}, print_) is None  # other kwargs
    store.backend_path(print_).write_text("{ cut")
    assert store.load(QWEN_DIR, {}, print_) is None
    facts.write_text(json.dumps({**json.loads(facts.read_text()), "fingerprint": "x"}))
    assert store.load(QWEN_DIR, {}, print_) is None


def test_plans_turned_off_are_never_kept(isolated_cache: Path) -> None:
    real = ChatTokenizer(QWEN_DIR)
    real.render([{"role": "user", "content": "hi"}])
    assert real.plans is not None
    real.plans.verified([{"role": "user", "content": "hi"}], same=False)  # a difference
    store.save(real, fingerprint(QWEN_DIR))
    assert store.load(QWEN_DIR, {}, fingerprint(QWEN_DIR)) is None
    again = ChatTokenizer(QWEN_DIR)
    again.render([{"role": "user", "content": "hi"}])
    store.save(again, fingerprint(QWEN_DIR))  # off stays off
    assert store.load(QWEN_DIR, {}, fingerprint(QWEN_DIR)) is None


@pytest.mark.parametrize("locator", TOKENIZERS, indirect=True)
def test_remembered_words_count_as_modelled_ones(locator: str, isolated_cache: Path) -> None:
    """A run that remembers the words and characters an earlier run kept counts exactly as
    AutoTokenizer, modelling and probing nothing it was given."""
    texts = [m["content"] for chat in _chats() for m in chat] + ADVERSARIAL
    auto = AutoTokenizer.from_pretrained(locator, local_files_only=True)
    expected = [len(auto(t, add_special_tokens=False)["input_ids"]) for t in texts]
    first = ChatTokenizer(locator)
    assert first.count_texts(texts[::2]) == expected[::2]
    store.keep_words(first, fingerprint(locator))
    path = store.words_path(fingerprint(locator))
    if first.learned_words() is None:  # no counting by word (no proved split): nothing kept
        assert not path.exists()
        return
    again = ChatTokenizer(locator)
    store.recall_words(again, fingerprint(locator))
    assert again.count_texts(texts) == expected
    learned = again.learned_words()
    assert learned is not None
    assert learned.words and not learned.words.keys() & json.loads(path.read_text())["words"]
    store.keep_words(again, fingerprint(locator))  # grows by what was new
    third = ChatTokenizer(locator)
    store.recall_words(third, fingerprint(locator))
    assert third.count_texts(texts) == expected
    assert third.learned_words() == WordMemory({}, {})
    assert third.word_memory() is None  # nothing new: not written again


def test_a_damaged_or_foreign_word_memory_is_not_used(isolated_cache: Path) -> None:
    print_ = fingerprint(QWEN_DIR)
    path = store.words_path(print_)
    first = ChatTokenizer(QWEN_DIR)
    first.count_texts(["hello there, world"])
    store.keep_words(first, print_)
    good = json.loads(path.read_text())
    assert good["words"] == {"hello": 1, " there": 1, ",": 1, " world": 1}
    damaged = [
        {**good, "fingerprint": "x"},
        {**good, "version": 0},
        {**good, "rules": "other probes"},
        {**good, "words": {**good["words"], "hello": 7.0}},
        {**good, "words": {**good["words"], "hello": 0}},
        {**good, "words": {**good["words"], "hello": True}},
        {**good, "chars": {"ab": True}},
        {**good, "chars": {"é": 1}},
        [good],
    ]
    for bad in [*damaged, "{ cut"]:
        path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
        tok = ChatTokenizer(QWEN_DIR)
        store.recall_words(tok, print_)
        assert tok.count_texts(["hello there, world"]) == [4]
        learned = tok.learned_words()
        assert learned is not None and "hello" in learned.words  # modelled, not remembered
    path.write_text(json.dumps(good))
    tok = ChatTokenizer(QWEN_DIR)
    store.recall_words(tok, print_)
    assert tok.count_texts(["hello there, world"]) == [4]
    assert tok.learned_words() == WordMemory({}, {})  # remembered, not modelled


def test_words_counted_in_forked_children_are_kept(isolated_cache: Path) -> None:
    from inferlab_bench.prepare.tokens.counting import count_on_all_cores

    words = ["apple", "berry", "cherry", "damson", "elder", "fig", "grape", "hazel"]
    texts = [f"{word} " * 5000 for word in words]  # past the parallel threshold
    tok = ChatTokenizer(QWEN_DIR)
    counts = count_on_all_cores(tok, texts, workers=2)
    store.keep_words(tok, fingerprint(QWEN_DIR))
    kept = json.loads(store.words_path(fingerprint(QWEN_DIR)).read_text())["words"]
    assert {" " + word for word in words} <= kept.keys()  # odd ones came from the child
    assert counts == ChatTokenizer(QWEN_DIR).count_texts(texts)


def test_words_counted_by_the_table_workers_are_kept(
    isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold run's table is built by forked workers (the parent only collects batches):
    the words they counted come back with each batch and are kept, and a later run that
    remembers them counts as AutoTokenizer does."""
    from inferlab_bench.prepare import table
    from inferlab_bench.prepare.sharegpt import read_records

    monkeypatch.setattr(table, "_CHUNK", 8)  # several spans from the small sample
    tok = ChatTokenizer(QWEN_DIR)
    records = read_records(REAL_SAMPLE).records
    table.build_table(records, tok, 300, workers=2)  # small limit: many inputs counted
    store.keep_words(tok, fingerprint(QWEN_DIR))
    kept = json.loads(store.words_path(fingerprint(QWEN_DIR)).read_text())["words"]
    assert len(kept) > 1000
    texts = [m["content"] for chat in _chats() for m in chat]
    auto = AutoTokenizer.from_pretrained(QWEN_DIR, local_files_only=True)
    again = ChatTokenizer(QWEN_DIR)
    store.recall_words(again, fingerprint(QWEN_DIR))
    assert again.count_texts(texts) == [
        len(auto(t, add_special_tokens=False)["input_ids"]) for t in texts
    ]
    learned = again.learned_words()
    assert learned is not None and learned.words.keys().isdisjoint(kept)  # none modelled twice


_STAGE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from inferlab_bench.prepare.stage import run_prepare
    from inferlab_bench.protocol import BenchDatasetPreparationRequest, parse_request
    request = parse_request(BenchDatasetPreparationRequest, Path(sys.argv[1]).read_bytes())
    result = run_prepare(request, catalog_dir=Path(sys.argv[2]))
    assert result.status.value == "succeeded", result.error
    print(json.dumps([m for m in ("transformers", "numpy", "pyarrow") if m in sys.modules]))
    """
)


def test_a_warm_run_with_another_seed_never_imports_transformers(
    dataset: Any, tmp_path: Path, isolated_cache: Path
) -> None:
    """Seed 1 cold, then seed 2 warm in a fresh process: the newly chosen entries are counted
    by the kept tokenizer, and the population equals a cold run's with seed 2. The warm run
    imports neither transformers nor numpy nor pyarrow (``tokentable``)."""
    records = json.loads(REAL_SAMPLE.read_text())
    source, catalog = dataset(records)
    imported = {}
    for name, seed in (("cold", 1), ("warm", 2)):
        request = prep_request(source, catalog, tmp_path / name, required=20, seed=seed)
        path = tmp_path / f"{name}.json"
        path.write_text(request.model_dump_json())
        done = subprocess.run(
            [sys.executable, "-c", _STAGE, str(path), str(catalog)],
            capture_output=True,
            text=True,
            check=True,
            env={**_env(), "XDG_CACHE_HOME": str(isolated_cache)},
        )
        imported[name] = json.loads(done.stdout.strip().splitlines()[-1])
    manifest = json.loads((tmp_path / "warm" / "preparation-manifest.json").read_text())
    assert imported == {"cold": ["transformers", "numpy", "pyarrow"], "warm": []}
    assert manifest["tokenizer_loaded"] == "kept"
    assert manifest["chosen_entries_counted_now"] > 0
    assert store.words_path(fingerprint(QWEN_DIR)).is_file()  # kept by the cold run
    fresh = prep_request(source, catalog, tmp_path / "fresh", required=20, seed=2)
    isolated_cache.rename(tmp_path / "old-cache")  # a cold run with seed 2
    assert run_prepare(fresh, catalog_dir=catalog).status.value == "succeeded"
    population = "population.jsonl"
    assert (tmp_path / "warm" / population).read_bytes() == (
        tmp_path / "fresh" / population
    ).read_bytes()


def test_a_warm_run_whose_kept_backend_is_damaged_loads_the_real_tokenizer(
    dataset: Any, tmp_path: Path, isolated_cache: Path
) -> None:
    """A kept backend that cannot be read: the real tokenizer counts, and the population
    is the one a cold run freezes."""
    source, catalog = dataset(json.loads(REAL_SAMPLE.read_text()))
    cold = prep_request(source, catalog, tmp_path / "cold", required=20, seed=1)
    assert run_prepare(cold, catalog_dir=catalog).status.value == "succeeded"
    store.backend_path(fingerprint(QWEN_DIR)).write_text("{ cut")
    warm = prep_request(source, catalog, tmp_path / "warm", required=20, seed=2)
    assert run_prepare(warm, catalog_dir=catalog).status.value == "succeeded"
    manifest = json.loads((tmp_path / "warm" / "preparation-manifest.json").read_text())
    assert manifest["tokenizer_loaded"] == "transformers"
    assert manifest["chosen_entries_counted_now"] > 0
    isolated_cache.rename(tmp_path / "old-cache")
    fresh = prep_request(source, catalog, tmp_path / "fresh", required=20, seed=2)
    assert run_prepare(fresh, catalog_dir=catalog).status.value == "succeeded"
    population = "population.jsonl"
    assert (tmp_path / "warm" / population).read_bytes() == (
        tmp_path / "fresh" / population
    ).read_bytes()


def test_a_wrong_word_memory_is_caught_by_the_check_and_forgotten(isolated_cache: Path) -> None:
    """A kept word count that is wrong (a damaged memory, a bug in our reading of the
    tokenizer) makes a checked text's two counts differ: every text of that call is then
    encoded (the counts are the tokenizer's own, also past the check), and keeping removes
    the memory, so that no later run trusts it."""
    _, real = _kept(QWEN_DIR)
    texts = [real.render(chat) for chat in _chats()]
    real.count_texts(texts)
    store.keep_words(real, fingerprint(QWEN_DIR))
    path = store.words_path(fingerprint(QWEN_DIR))
    stored = json.loads(path.read_text())
    stored["words"][" the"] = stored["words"][" the"] + 1
    path.write_text(json.dumps(stored))
    filler = "\n".join(texts) * (pretoken.CHECKED // len("\n".join(texts)) + 1)
    kept = store.load(QWEN_DIR, {}, fingerprint(QWEN_DIR))
    assert kept is not None and kept.transformers_tokenizer is None
    # the filler alone is checked: the texts after it would keep the memory's wrong counts
    exact = [len(e) for e in kept._backend.encode_batch([filler, *texts], add_special_tokens=False)]
    assert kept.count_texts([filler, *texts]) == exact
    assert kept.word_counts_differed
    store.keep(kept, fingerprint(QWEN_DIR))
    assert not path.exists()


def test_the_command_line_warm_run_with_another_seed_counts_with_the_kept_tokenizer(
    dataset: Any, tmp_path: Path, isolated_cache: Path
) -> None:
    """``inferlab-bench prepare --input``, cold with seed 1 then warm with seed 2: the warm
    run counts with the kept tokenizer and writes what a cold run with seed 2 writes; a
    request that fails still writes its failed result and exits 0."""
    records = json.loads(REAL_SAMPLE.read_text())
    source, catalog = dataset(records)
    env = {**_env(), "XDG_CACHE_HOME": str(isolated_cache)}

    def prepare(name: str, request: Any) -> tuple[int, dict[str, Any]]:
        path = tmp_path / f"{name}.json"
        path.write_text(request.model_dump_json())
        out = tmp_path / f"{name}.result.json"
        command = [sys.executable, "-m", "inferlab_bench", "prepare", "--input", str(path)]
        command += ["--output", str(out), "--catalog-dir", str(catalog)]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        return done.returncode, json.loads(out.read_text())

    for name, seed in (("cold", 1), ("warm", 2)):
        code, result = prepare(name, prep_request(source, catalog, tmp_path / name, seed=seed))
        assert code == 0 and result["status"] == "succeeded", result["error"]
    manifest = json.loads((tmp_path / "warm" / "preparation-manifest.json").read_text())
    assert manifest["tokenizer_loaded"] == "kept"
    assert manifest["chosen_entries_counted_now"] > 0
    broken = prep_request(source, catalog, tmp_path / "broken", required=10**6)
    code, result = prepare("broken", broken)  # JSON mode: the result file says it failed
    assert code == 0 and result["status"] == "failed" and "10000" in str(result["error"])
    isolated_cache.rename(tmp_path / "old-cache")  # a cold run with seed 2
    fresh = prep_request(source, catalog, tmp_path / "fresh", seed=2)
    assert run_prepare(fresh, catalog_dir=catalog).status.value == "succeeded"
    population = "population.jsonl"
    assert (tmp_path / "warm" / population).read_bytes() == (
        tmp_path / "fresh" / population
    ).read_bytes()


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(REPO), "TOKENIZERS_PARALLELISM": "false"}


def test_kept_plans_keep_their_checks_and_refuse_foreign_operations() -> None:
    from inferlab_bench.prepare.tokens.template import Plans

    checks = [
        [[0], "startswith", [{"tuple": ["x", "y"]}], [], False],
        [[0], "__getitem__", [{"slice": [0, 2, None]}], [], "hi"],
        [[0], "split", [], [["maxsplit", 1]], {"list": ["hi", "there"]}],
    ]
    plans = Plans.from_verified([{"shape": ["user"], "pieces": ["<", 0, ">"], "checks": checks}])
    assert plans is not None
    assert plans.verified_text([{"role": "user", "content": "hi there"}]) == "<hi there>"
    assert plans.verified_text([{"role": "user", "content": "hi you"}]) is None  # split differs
    assert plans.verified_text([{"role": "user", "content": "hi", "x": ""}]) is None
    assert Plans.from_verified(plans.verified_plans()) is not None  # round trip
    foreign = [[[0], "__reduce__", [], [], None]]
    assert Plans.from_verified([{"shape": ["user"], "pieces": [0], "checks": foreign}]) is None
    assert Plans.from_verified([{"shape": ["user"], "pieces": [[0]], "checks": []}]) is None

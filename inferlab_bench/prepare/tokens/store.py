"""The tokenizer kept for warm preparations: AutoTokenizer's backend, added tokens and plans.

A warm preparation with another seed or size counts the newly chosen entries that lack
counts. Loading them through transformers costs more than a second (its import and
AutoTokenizer), the rest of the run about half that. So whenever the real tokenizer was
loaded, its backend is written as the tokenizers library serializes it (keyed by the
tokenizer fingerprint, which covers its files and the transformers and tokenizers
versions), with the facts ``ChatTokenizer`` judged from the transformers side (which added
tokens are cut out verbatim) and every template plan verified against a real render
(keyed by fingerprint and template kwargs). A later run reads them back with the
tokenizers library alone (``tokenizer.load_backend``) and uses them only when every entry
it must count renders from a verified plan; anything missing, unreadable or foreign means
the real tokenizer, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.errors import InferlabError
from inferlab_bench.layout import cache_root
from inferlab_bench.prepare.tokens import pretoken
from inferlab_bench.prepare.tokens.pretoken import WordMemory
from inferlab_bench.prepare.tokens.template import Plans
from inferlab_bench.prepare.tokens.tokenize import ChatTokenizer
from inferlab_bench.tokenizer import load_backend, save_backend

STORE_VERSION = 1
_MAX_WORDS = 2_000_000
"""A word memory past this many words is not grown further (about 60 MB of JSON)."""


def _directory() -> Path:
    return cache_root() / "tokenizers"


def backend_path(fingerprint: str) -> Path:
    return _directory() / f"{fingerprint}.backend.json"


def facts_path(fingerprint: str, template_kwargs: Mapping[str, Any]) -> Path:
    key = orjson.dumps([fingerprint, dict(template_kwargs)], option=orjson.OPT_SORT_KEYS)
    return _directory() / f"{hashlib.sha256(key).hexdigest()}.facts.json"


def load(
    locator: str, template_kwargs: Mapping[str, Any], fingerprint: str
) -> ChatTokenizer | None:
    """The kept tokenizer, with the words it counted in earlier runs (``recall_words``), or
    None when there is none for these keys (or it is damaged)."""
    kept = _kept_facts(fingerprint, template_kwargs)
    if kept is None:
        return None
    plans, added = kept
    backend = load_backend(backend_path(fingerprint))
    if backend is None:
        return None
    tok = ChatTokenizer.from_backend(locator, template_kwargs, backend, added, plans)
    recall_words(tok, fingerprint)
    return tok


def keep(tok: ChatTokenizer, fingerprint: str) -> None:
    """After a run: keep ``tok`` (``save``: only one loaded through transformers) and what
    it learned of words (``keep_words``), so that the next run counts without transformers
    and models only the words new to it."""
    save(tok, fingerprint)
    keep_words(tok, fingerprint)


def _kept_facts(
    fingerprint: str, template_kwargs: Mapping[str, Any]
) -> tuple[Plans, list[str] | None] | None:
    """The kept verified plans and added tokens, or None (none kept, plans off, damaged)."""
    facts = _facts(fingerprint, template_kwargs)
    if facts is None or facts.get("plans_off"):
        return None
    plans = Plans.from_verified(facts.get("plans"))
    added = facts.get("added")
    if plans is None or not (added is None or _strings(added)):
        return None
    return plans, added


def save(tok: ChatTokenizer, fingerprint: str) -> None:
    """Keep ``tok`` (loaded through transformers) for later runs: its backend once per
    fingerprint, and its verified plans merged with those kept before. A failure to write
    only costs a later run the slow load."""
    real = tok.transformers_tokenizer
    if real is None:
        return
    kwargs = tok.template_kwargs
    plans = tok.plans
    try:
        path = backend_path(fingerprint)
        if not path.is_file() and plans is not None and not plans.off:
            save_backend(real, path)
        before = _facts(fingerprint, kwargs) or {}
        off = bool(before.get("plans_off")) or plans is None or plans.off
        merged = {} if off else {tuple(p["shape"]): p for p in before.get("plans") or []}
        if not off and plans is not None:
            merged.update({tuple(p["shape"]): p for p in plans.verified_plans()})
        facts = {
            "version": STORE_VERSION,
            "fingerprint": fingerprint,
            "template_kwargs": kwargs,
            "added": tok.added_tokens,
            "plans_off": off,
            "plans": [merged[shape] for shape in sorted(merged)],
        }
        if facts != before:
            data = orjson.dumps(facts, option=orjson.OPT_SORT_KEYS)
            write_bytes_atomic(facts_path(fingerprint, kwargs), data)
    except (OSError, InferlabError, TypeError):
        return


def _facts(fingerprint: str, template_kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    try:
        facts = orjson.loads(facts_path(fingerprint, template_kwargs).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    same = (
        isinstance(facts, dict)
        and facts.get("version") == STORE_VERSION
        and facts.get("fingerprint") == fingerprint
        and facts.get("template_kwargs") == dict(template_kwargs)
    )
    return facts if same else None


def _strings(values: Any) -> bool:
    return isinstance(values, list) and all(isinstance(v, str) for v in values)


def words_path(fingerprint: str) -> Path:
    return _directory() / f"{fingerprint}.words.json"


def recall_words(tok: ChatTokenizer, fingerprint: str) -> None:
    """Give ``tok`` the word counts and character verdicts kept by earlier runs with this
    tokenizer (``keep_words``), if any: a run with another seed then models and probes
    only what is new to it. Each entry is what ``pretoken`` computes from the backend
    alone, and the fingerprint covers the backend (files and library versions); the
    memory also names the split rules that judged the characters, and one kept under
    other rules, damaged or foreign is not used."""
    kept = _kept_memory(fingerprint)
    if kept is not None:
        tok.remember_words(kept)


def _kept_memory(fingerprint: str) -> WordMemory | None:
    """The kept word counts and character verdicts; None if none is usable."""
    try:
        kept = orjson.loads(words_path(fingerprint).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    same = (
        isinstance(kept, dict)
        and kept.get("version") == STORE_VERSION
        and kept.get("fingerprint") == fingerprint
        and kept.get("rules") == pretoken.RULES_IDENTITY
    )
    words, chars = (kept.get("words"), kept.get("chars")) if same else (None, None)
    if not (isinstance(words, dict) and isinstance(chars, dict)):
        return None
    counts = words.values()  # checked in C: this runs on every warm preparation
    if not (set(map(type, counts)) <= {int} and min(counts, default=1) > 0):
        return None
    if not all(type(ok) is bool and len(c) == 1 for c, ok in chars.items()):
        return None
    return WordMemory(words, chars)


def keep_words(tok: ChatTokenizer, fingerprint: str) -> None:
    """Keep what ``tok`` knows of words and characters for the next run, when this run
    learned something (a failure to write only costs the next run the modelling). When a
    count by word differed from the tokenizer's own, the memory is removed instead: it may
    be what was wrong, and no later run should trust it."""
    if tok.word_counts_differed:
        with contextlib.suppress(OSError):
            words_path(fingerprint).unlink(missing_ok=True)
        return
    memory = tok.word_memory()
    if memory is None or len(memory.words) > _MAX_WORDS:
        return
    kept = {
        "version": STORE_VERSION,
        "fingerprint": fingerprint,
        "rules": pretoken.RULES_IDENTITY,
        "words": memory.words,
        "chars": memory.chars,
    }
    with contextlib.suppress(OSError, InferlabError):
        write_bytes_atomic(words_path(fingerprint), orjson.dumps(kept))

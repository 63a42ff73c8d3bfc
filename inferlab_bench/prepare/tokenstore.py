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

import atexit
import contextlib
import hashlib
import multiprocessing
import re
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.errors import InferlabError
from inferlab_bench.layout import cache_root
from inferlab_bench.prepare import pretoken
from inferlab_bench.prepare.background import Background
from inferlab_bench.prepare.patterns import PATTERNS
from inferlab_bench.prepare.pretoken import WordCounter, WordMemory
from inferlab_bench.prepare.template import Plans
from inferlab_bench.prepare.tokenize import (
    ChatTokenizer,
    added_token_splitter,
    count_by_word,
    fingerprint,
)
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
    """The kept tokenizer, or None when there is none for these keys (or it is damaged)."""
    kept = _kept_facts(fingerprint, template_kwargs)
    if kept is None:
        return None
    plans, added = kept
    backend = load_backend(backend_path(fingerprint))
    if backend is None:
        return None
    return ChatTokenizer.from_backend(locator, template_kwargs, backend, added, plans)


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


class KeptCounter:
    """The kept tokenizer, read by a forked helper while this process selects.

    Reading the backend (``Tokenizer.from_file``) holds the GIL for a few tenths of a
    second, so it is done in a child started as early as possible: by the command line
    before it even builds its parser (``start_early``, from ``cli.headstart``), else as
    soon as the warm table is found. The child works out the tokenizer's fingerprint
    itself and reads what is kept for it; this process meanwhile selects and renders the
    chosen inputs from the kept plans (``bind``: they need no backend). ``count`` then
    counts the texts here, by word from the kept word counts, while the child checks the
    first of them with the tokenizer itself; then the child models the few words and
    texts the memory could not count (until 2026-12-06 the child counted everything
    while this process waited), and keeps what it learned (``keep_words``) while this
    process writes its outputs. A helper that cannot read the tokenizer, holds another
    fingerprint, or fails in any way answers None: the caller then loads the real
    tokenizer, as without a kept one.
    """

    def __init__(self, key: tuple[str, bytes], process: Any, connection: Any) -> None:
        self.key = key
        self._process = process
        self._connection = connection
        self._fingerprint: str | None = None
        self._plans: Plans | None = None
        self._added: list[str] | None = None
        self.from_memory = 0
        """Texts of the last ``count`` counted here from the kept word memory."""
        self.asked = False
        self.counted = False

    @classmethod
    def start(cls, locator: str, template_kwargs: Mapping[str, Any]) -> KeptCounter:
        """Fork the helper now; it reads whatever is kept for this tokenizer."""
        context = multiprocessing.get_context("fork")
        ours, theirs = context.Pipe()
        # Not a daemon: it keeps its words after answering. ``close`` always ends it.
        process = context.Process(target=_serve, args=(theirs, locator, dict(template_kwargs)))
        process.start()
        theirs.close()
        return cls(_key(locator, template_kwargs), process, ours)

    def bind(self, fingerprint: str, plans: Plans, added: list[str] | None) -> None:
        """Count for the tokenizer this run uses (``fingerprint``), rendering from its kept
        verified ``plans`` and cutting at its ``added`` tokens (``kept_facts``); until
        bound the helper is never asked."""
        self._fingerprint, self._plans, self._added = fingerprint, plans, added

    def planned(self, messages: Sequence[Mapping[str, str]]) -> str | None:
        """``messages`` rendered from a kept verified plan, or None."""
        return None if self._plans is None else self._plans.verified_text(messages)

    def count(self, texts: list[str]) -> list[int] | None:
        """Exact counts of ``texts``, or None if the helper has none to give.

        This process counts them by word from the kept word counts (``memory_counter``)
        while the helper, as soon as its tokenizer is read, encodes the texts that make up
        the first ``pretoken.CHECKED`` characters (the check ``count_texts`` makes of its
        own counts). Then the helper models the words the memory lacked and counts the
        texts it could not (a character without a kept verdict). One checked text whose
        two counts differ, and the answer is None (the real tokenizer then counts all) and
        the memory is removed (``_answer``). Without a memory, the helper counts every text
        (``count_texts``).
        """
        if self._fingerprint is None:
            return None
        self.asked = True
        counter = None if self._added is None else memory_counter(self._fingerprint)
        checked = _checked_prefix(texts) if counter is not None else 0
        first = (self._fingerprint, texts[:checked])
        try:
            # A message larger than the pipe's buffer waits until the helper reads it, which
            # it does once its tokenizer is read: sent from a thread, while this one counts.
            sending = Background(lambda: self._connection.send(first))
            try:
                by_memory = _counted_by_memory(counter, self._added, texts)
            finally:
                sending.result()  # never two sends at once on the pipe
            missing = sorted({word for c in by_memory if c is not None for word in c[1]})
            rest = [texts[k] for k in range(checked, len(texts)) if by_memory[k] is None]
            self._connection.send((missing, rest, by_memory[:checked]))
            answer = self._connection.recv()
        except (OSError, EOFError):
            return None
        counts = _combined(answer, by_memory, checked, missing, rest)
        self.counted = counts is not None
        self.from_memory = sum(c is not None for c in by_memory) if self.counted else 0
        return counts

    def close(self, *, wait: bool) -> None:
        """End the helper: after counting, let it finish keeping its words (``wait``);
        otherwise (never asked, or the run failed) stop it now."""
        if self._connection.closed:
            return
        if not (wait and self.asked):
            with contextlib.suppress(OSError):
                self._connection.send(None)
            self._process.join(timeout=0.05)
            if self._process.is_alive():
                self._process.terminate()
        self._connection.close()
        self._process.join()


def memory_counter(fingerprint: str) -> WordCounter | None:
    """A counter from the word counts and character verdicts kept for this tokenizer
    (``keep_words``), or None when none are kept with the split pattern they belong to."""
    kept = _kept_memory(fingerprint)
    if kept is None or kept[1] is None or kept[1] not in PATTERNS:
        return None
    return WordCounter.from_memory(kept[1], kept[0])


def _checked_prefix(texts: list[str]) -> int:
    """How many leading texts make up the first ``pretoken.CHECKED`` characters."""
    total = 0
    for k, text in enumerate(texts):
        if total >= pretoken.CHECKED:
            return k
        total += len(text)
    return len(texts)


def _counted_by_memory(
    counter: WordCounter | None, added: list[str] | None, texts: list[str]
) -> list[tuple[int, list[str]] | None]:
    """Each text's count from the memory (``_by_memory``); all None without a counter."""
    if counter is None or added is None:
        return [None] * len(texts)
    splitter = added_token_splitter(added)
    return [_by_memory(counter, splitter, text) for text in texts]


def _by_memory(
    counter: WordCounter, splitter: re.Pattern[str], text: str
) -> tuple[int, list[str]] | None:
    """``text``'s count from the memory, less its unknown words (listed), or None."""
    count = count_by_word(counter, splitter, text)
    missed = counter.take_missed()
    return None if count is None else (count, missed)


def _combined(
    answer: Any,
    by_memory: list[tuple[int, list[str]] | None],
    checked: int,
    missing: list[str],
    rest: list[str],
) -> list[int] | None:
    """The counts from the memory and the helper's ``answer`` (the checked texts' exact
    counts, the missing words' and the rest's), or None when there is no whole answer."""
    if not (isinstance(answer, tuple) and len(answer) == 3):
        return None
    check, words, others = answer
    sizes = ((check, checked), (words, len(missing)), (others, len(rest)))
    if not all(isinstance(a, list) and len(a) == n and _ints(a) for a, n in sizes):
        return None
    known = dict(zip(missing, words, strict=True))
    rest_counts = iter(others)
    counts = []
    for k, found in enumerate(by_memory):
        if k < checked:
            counts.append(check[k])  # equal to the memory's where it counted (``_agrees``)
        elif found is None:
            counts.append(next(rest_counts))
        else:
            counts.append(_completed(found, known))
    return counts


def _agrees(
    by_memory: list[tuple[int, list[str]] | None], exact: list[int], known: dict[str, int]
) -> bool:
    """Whether every checked text the memory counted has its exact count."""
    return all(
        found is None or _completed(found, known) == count
        for found, count in zip(by_memory, exact, strict=True)
    )


def _completed(found: tuple[int, list[str]], known: dict[str, int]) -> int:
    """A count from the memory (``_by_memory``) with its unknown words' counts added."""
    count, missed = found
    return count + sum(known[word] for word in missed)


def _ints(values: list[Any]) -> bool:
    return all(type(n) is int for n in values)


def kept_facts(
    fingerprint: str, template_kwargs: Mapping[str, Any]
) -> tuple[Plans, list[str] | None] | None:
    """The kept verified plans and added tokens when a helper would find a usable kept
    tokenizer for these keys (facts and backend both kept), else None."""
    kept = _kept_facts(fingerprint, template_kwargs)
    if kept is None or not backend_path(fingerprint).is_file():
        return None
    return kept


def _key(locator: str, template_kwargs: Mapping[str, Any]) -> tuple[str, bytes]:
    return locator, orjson.dumps(dict(template_kwargs), option=orjson.OPT_SORT_KEYS)


_EARLY: list[KeptCounter] = []
"""The helper ``start_early`` started (at most one), until taken or stopped."""


def start_early(locator: str, template_kwargs: Mapping[str, Any]) -> None:
    """Start the helper before the stage is even imported (the command line does, for a
    preparation request): a warm run then finds the kept tokenizer read. ``take_early``
    hands it to the stage; one never taken is stopped at exit."""
    stop_early()
    _EARLY.append(KeptCounter.start(locator, template_kwargs))
    # Registered after the fork, so after multiprocessing registered its own exit handler
    # (atexit runs last-registered first): that one joins the child, which would wait on
    # its pipe for ever unless this one has stopped it already.
    atexit.unregister(stop_early)
    atexit.register(stop_early)


def take_early(locator: str, template_kwargs: Mapping[str, Any]) -> KeptCounter | None:
    """The helper ``start_early`` started, if it was for this tokenizer and these kwargs
    (one for others is stopped)."""
    helper = _EARLY.pop() if _EARLY else None
    if helper is not None and helper.key != _key(locator, template_kwargs):
        helper.close(wait=False)
        return None
    return helper


def stop_early() -> None:
    """Stop a helper started early and never taken (a cold run, a failed request)."""
    while _EARLY:
        _EARLY.pop().close(wait=False)


def _serve(connection: Any, locator: str, kwargs: dict[str, Any]) -> None:
    """The helper: read the kept tokenizer, count what it is sent, keep the words learned."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)  # not the stage's guard: ``close`` may stop it
    tok, ours = None, None
    with contextlib.suppress(Exception):  # an unreadable locator: the stage says so itself
        ours = fingerprint(locator)
        tok = load(locator, kwargs, ours)
    if tok is not None and ours is not None:
        recall_words(tok, ours)
    asked = _received(connection)
    if asked is None:
        return
    theirs, checking = asked  # see ``KeptCounter.count``
    check = None
    if tok is not None and theirs == ours:
        with contextlib.suppress(Exception):  # any failure: the caller counts exactly itself
            check = tok.exact_counts(checking)
    asked = _received(connection)
    if asked is None:
        return
    answer = None
    if tok is not None and check is not None and ours is not None:
        with contextlib.suppress(Exception):
            answer = _answer(tok, ours, check, *asked)
    with contextlib.suppress(OSError):
        connection.send(answer)
    connection.close()
    if tok is not None and answer is not None and ours is not None:
        keep_words(tok, ours)


def _answer(
    tok: ChatTokenizer,
    fingerprint: str,
    check: list[int],
    words: list[str],
    texts: list[str],
    counted: list[tuple[int, list[str]] | None],
) -> tuple[list[int], list[int], list[int]] | None:
    """The helper's answer (``KeptCounter.count``): the checked texts' exact counts, the
    missing words' and the rest's. None when a checked text's count from the memory
    differs from the tokenizer's own: the memory (or our reading of the tokenizer) is
    wrong, so it is removed, never to be used again, and the caller counts exactly."""
    modelled = tok.model_counts(words) if words else []
    if modelled is None:
        return None
    if not _agrees(counted, check, dict(zip(words, modelled, strict=True))):
        words_path(fingerprint).unlink(missing_ok=True)
        return None
    return check, modelled, tok.count_texts(texts)


def _received(connection: Any) -> Any:
    """The next message, or None when the caller sent None (stop) or is gone."""
    try:
        return connection.recv()
    except (OSError, EOFError):
        return None


def start_saving_backend(tok: ChatTokenizer, fingerprint: str) -> Callable[[], None]:
    """Write ``tok``'s backend (once per fingerprint) in a forked child, so that the few
    tenths of a second it takes overlap the rest of the run; returns the wait for it. Not
    written when the template has no plans (``load`` would never use it). The child is not
    a daemon: a run that fails before waiting still lets it finish at exit."""
    plans = tok.plans
    useless = plans is None or plans.off
    if tok.transformers_tokenizer is None or useless or backend_path(fingerprint).is_file():
        return _nothing
    child = multiprocessing.get_context("fork").Process(
        target=_save_backend, args=(tok, fingerprint)
    )
    child.start()
    return child.join


def _nothing() -> None:
    return None


def _save_backend(tok: ChatTokenizer, fingerprint: str) -> None:
    with contextlib.suppress(OSError, InferlabError):  # not kept: a later run loads slowly
        save_backend(tok.transformers_tokenizer, backend_path(fingerprint))


def save(tok: ChatTokenizer, fingerprint: str) -> None:
    """Keep ``tok`` (loaded through transformers) for later runs: its backend once per
    fingerprint (unless ``start_saving_backend`` is doing it), and its verified plans merged
    with those kept before. A failure to write only costs a later run the slow load."""
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
        tok.remember_words(kept[0])


def _kept_memory(fingerprint: str) -> tuple[WordMemory, str | None] | None:
    """The kept word counts and character verdicts, and the split pattern they were
    counted under (None in a memory kept before patterns were); None if none is usable."""
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
    pattern = kept.get("pattern")
    return WordMemory(words, chars), pattern if isinstance(pattern, str) else None


def keep_words(tok: ChatTokenizer, fingerprint: str) -> None:
    """Keep what ``tok`` knows of words and characters for the next run, when this run
    learned something (a failure to write only costs the next run the modelling)."""
    memory = tok.word_memory()
    if memory is None or len(memory.words) > _MAX_WORDS:
        return
    kept = {
        "version": STORE_VERSION,
        "fingerprint": fingerprint,
        "rules": pretoken.RULES_IDENTITY,
        "pattern": tok.word_pattern,
        "words": memory.words,
        "chars": memory.chars,
    }
    with contextlib.suppress(OSError, InferlabError):
        write_bytes_atomic(words_path(fingerprint), orjson.dumps(kept))

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
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.errors import InferlabError
from inferlab_bench.layout import cache_root
from inferlab_bench.prepare import pretoken
from inferlab_bench.prepare.background import Background
from inferlab_bench.prepare.patterns import PATTERNS
from inferlab_bench.prepare.pretoken import WordCounter, WordMemory
from inferlab_bench.prepare.template import Plans
from inferlab_bench.prepare.tokenize import ChatTokenizer, added_token_splitter, fingerprint
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
    before it even parses its flags (``start_early``), else as soon as the warm table is
    found. The child works out the tokenizer's fingerprint itself and reads what is kept
    for it; this process meanwhile selects and renders the chosen inputs from the kept
    plans (``bind``: they need no backend).

    ``count`` then splits the work (see its docstring): the child counts half of the texts
    with the kept tokenizer while this process counts the other half from the kept word
    memory alone (``Remembered``), and the child models the words that memory lacks. A
    helper that cannot read the tokenizer, holds another fingerprint, or fails in any way
    answers None: the caller then loads the real tokenizer, as without a kept one. After
    counting, the child keeps what it learned of words (``keep_words``).
    """

    def __init__(self, key: tuple[str, bytes], process: Any, connection: Any) -> None:
        self.key = key
        self._process = process
        self._connection = connection
        self._fingerprint: str | None = None
        self._kept: Kept | None = None
        self.asked = False
        self.counted = False

    @classmethod
    def start(cls, locator: str, template_kwargs: Mapping[str, Any]) -> KeptCounter:
        """Fork the helper now; it reads whatever is kept for this tokenizer."""
        context = multiprocessing.get_context("fork")
        ours, theirs = context.Pipe()
        # Not a daemon: ``close`` always ends it, after it kept its words if it counted.
        process = context.Process(target=_serve, args=(theirs, locator, dict(template_kwargs)))
        process.start()
        theirs.close()
        return cls(_key(locator, template_kwargs), process, ours)

    def bind(self, fingerprint: str, kept: Kept) -> None:
        """Count for the tokenizer this run uses (``fingerprint``), rendering from its kept
        verified plans (``kept_facts``); until bound the helper is never asked."""
        self._fingerprint, self._kept = fingerprint, kept

    def planned(self, messages: Sequence[Mapping[str, str]]) -> str | None:
        """``messages`` rendered from a kept verified plan, or None."""
        return None if self._kept is None else self._kept.plans.verified_text(messages)

    def count(self, texts: list[str]) -> list[int] | None:
        """Exact counts of ``texts``, or None if the helper has none to give.

        The odd texts go to the helper at once (sent from a thread: it may still be reading
        the tokenizer), which counts them as ``ChatTokenizer.count_texts`` does, check
        included. Meanwhile this process counts the even ones from the kept word memory
        (``Remembered``). Then the helper is sent the words that memory lacks (it models
        them), the texts memory cannot count (a character without a verdict, one refused),
        and, as the check of this process's share, its first ``pretoken.CHECKED // 2``
        characters counted from memory, which the helper encodes with the tokenizer itself.
        One difference there (or in the helper's own check, which turns its counting by word
        off) and every even text is encoded by the helper instead.
        """
        if self._fingerprint is None or self._kept is None:
            return None
        self.asked = True
        memory = Remembered.read(self._fingerprint, self._kept.added) if len(texts) > 1 else None
        try:
            if memory is None:
                counts = self._ask((_COUNT, self._fingerprint, texts))
            else:
                counts = self._count_shared(texts, memory)
        except (OSError, EOFError):
            counts = None
        self.counted = _counts_of(counts, texts)
        return counts if self.counted else None

    def _count_shared(self, texts: list[str], memory: Remembered) -> list[int] | None:
        mine, theirs = texts[0::2], texts[1::2]
        sending = Background(lambda: self._connection.send((_COUNT, self._fingerprint, theirs)))
        known = [memory.count(text) for text in mine]
        sending.result()
        counted_theirs = self._connection.recv()
        if not _counts_of(counted_theirs, theirs):
            return None
        unknown = sorted({word for k in known if k is not None for word in k[1]})
        whole = [i for i, k in enumerate(known) if k is None]
        checked = _first_chars([i for i, k in enumerate(known) if k is not None], mine)
        answer = self._ask((_FINISH, unknown, [mine[i] for i in whole], [mine[i] for i in checked]))
        counts_mine = _finish(known, answer, unknown, whole, checked)
        if counts_mine is None:  # a difference in the check, or the helper's own check
            counts_mine = self._ask((_ENCODE, mine))  # turned counting by word off
        if not _counts_of(counts_mine, mine):
            return None
        counts = [0] * len(texts)
        counts[0::2], counts[1::2] = counts_mine, counted_theirs
        return counts

    def _ask(self, question: tuple[Any, ...]) -> Any:
        self._connection.send(question)
        return self._connection.recv()

    def close(self, *, wait: bool) -> None:
        """End the helper: after counting, let it finish keeping its words (``wait``);
        otherwise (never asked, or the run failed) stop it now."""
        if self._connection.closed:
            return
        with contextlib.suppress(OSError):
            self._connection.send(None)
        if not (wait and self.asked):
            self._process.join(timeout=0.05)
            if self._process.is_alive():
                self._process.terminate()
        self._connection.close()
        self._process.join()


_COUNT, _FINISH, _ENCODE = "count", "finish", "encode"
"""What the helper is asked: count texts (with the fingerprint they are for); model words,
count texts and encode texts (the rest of a shared count); encode texts."""


def _counts_of(counts: Any, texts: Sequence[object]) -> TypeGuard[list[int]]:
    """Whether ``counts`` is a list of ints, one per text."""
    valid = isinstance(counts, list) and len(counts) == len(texts)
    return valid and all(type(n) is int for n in counts)


def _first_chars(candidates: list[int], texts: list[str]) -> list[int]:
    """The first of ``candidates`` whose texts hold ``pretoken.CHECKED // 2`` characters."""
    chosen, total = [], 0
    for i in candidates:
        if total >= pretoken.CHECKED // 2:
            break
        chosen.append(i)
        total += len(texts[i])
    return chosen


def _finish(
    known: list[tuple[int, list[str]] | None],
    answer: Any,
    unknown: list[str],
    whole: list[int],
    checked: list[int],
) -> list[int] | None:
    """The even texts' counts from memory and the helper's ``_FINISH`` answer; None if the
    answer is unusable or the check found a difference."""
    if not (isinstance(answer, tuple) and len(answer) == 3):
        return None
    words, counted, encoded = answer
    if not (_counts_of(words, unknown) and _counts_of(counted, whole)):
        return None
    if not _counts_of(encoded, checked):
        return None
    modelled = dict(zip(unknown, words, strict=True))
    counts = [0 if k is None else k[0] + sum(modelled[w] for w in k[1]) for k in known]
    for i, n in zip(whole, counted, strict=True):
        counts[i] = n
    same = all(counts[i] == n for i, n in zip(checked, encoded, strict=True))
    return counts if same else None


@dataclass(frozen=True)
class Kept:
    """What is kept for a tokenizer and template kwargs besides its backend: the verified
    plans and the added tokens ``ChatTokenizer`` cuts out verbatim (None: it does not)."""

    plans: Plans
    added: list[str] | None


class Remembered:
    """Counting by word from the kept word memory alone, without the tokenizer: the share of
    a warm count this process does while the helper does the other (``KeptCounter.count``).

    A text is cut at added tokens as ``ChatTokenizer.split_segments`` cuts it and each
    segment counted by ``pretoken.WordCounter.count_known`` with the memory's own words and
    character verdicts, under the split pattern they were kept with: the same sums
    ``count_texts`` makes, for the words the memory knows.
    """

    def __init__(self, added: list[str], counter: WordCounter) -> None:
        self._splitter = added_token_splitter(added)
        self._counter = counter

    @classmethod
    def read(cls, fingerprint: str, added: list[str] | None) -> Remembered | None:
        """The kept memory as a counter, or None (none kept, damaged, no pattern kept)."""
        kept = _read_words(fingerprint)
        if kept is None or added is None:
            return None
        memory, pattern = kept
        if pattern not in PATTERNS:
            return None
        return cls(added, WordCounter.from_memory(pattern, memory))

    def count(self, text: str) -> tuple[int, list[str]] | None:
        """(count of the known words and added tokens, the words not known), or None."""
        pieces = self._splitter.split(text)
        total, unknown = len(pieces) - 1, []
        for piece in pieces:
            if not piece:
                continue
            known = self._counter.count_known(piece)
            if known is None:
                return None
            total += known[0]
            unknown += known[1]
        return total, unknown


def kept_facts(fingerprint: str, template_kwargs: Mapping[str, Any]) -> Kept | None:
    """What is kept for these keys when a helper would find a usable kept tokenizer (plans
    and backend both kept), else None."""
    kept = _kept_facts(fingerprint, template_kwargs)
    if kept is None or not backend_path(fingerprint).is_file():
        return None
    return Kept(*kept)


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
    """The helper: read the kept tokenizer, answer what it is asked (``KeptCounter``), and
    keep the words learned if it counted anything."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)  # not the stage's guard: ``close`` may stop it
    tok, ours = None, None
    with contextlib.suppress(Exception):  # an unreadable locator: the stage says so itself
        ours = fingerprint(locator)
        tok = load(locator, kwargs, ours)
    if tok is not None and ours is not None:
        recall_words(tok, ours)
    answered = False
    while True:
        try:
            asked = connection.recv()
        except (OSError, EOFError):
            break
        answer = None
        if tok is not None and ours is not None and asked is not None:
            with contextlib.suppress(Exception):  # any failure: the caller counts itself
                answer = _answer(tok, ours, asked, answered)
        if asked is None:
            break
        with contextlib.suppress(OSError):
            connection.send(answer)
        answered = answered or answer is not None
    connection.close()
    if tok is not None and ours is not None and answered:
        keep_words(tok, ours)


def _answer(tok: ChatTokenizer, fingerprint: str, asked: Any, answered: bool) -> Any:
    """One answer of the helper; only a count for its own fingerprint opens the rest."""
    what = asked[0]
    if what == _COUNT:
        return tok.count_texts(asked[2]) if asked[1] == fingerprint else None
    if not answered:
        return None
    if what == _FINISH:
        words = tok.model_words(asked[1])
        if words is None:  # its own check turned counting by word off: so must the caller
            return None
        return words, tok.count_texts(asked[2]), tok.exact_counts(asked[3])
    if what == _ENCODE:
        return tok.exact_counts(asked[1])
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
    kept = _read_words(fingerprint)
    if kept is not None:
        tok.remember_words(kept[0])


def _read_words(fingerprint: str) -> tuple[WordMemory, str | None] | None:
    """The kept word memory and the split pattern it was counted under (None if not
    kept), or None when there is no usable memory."""
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
    if not all(type(n) is int and n > 0 for n in words.values()):
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

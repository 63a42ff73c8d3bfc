"""The only transformers use: load the model's tokenizer, render chat templates, count tokens."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inferlab_bench.errors import TokenizerError
from inferlab_bench.prepare.stamp import file_digest
from inferlab_bench.prepare.tokens import pretoken
from inferlab_bench.prepare.tokens.background import Background
from inferlab_bench.prepare.tokens.pretoken import WordCounter, WordMemory
from inferlab_bench.prepare.tokens.template import Plans
from inferlab_bench.tokenizer import load_tokenizer
from inferlab_bench.versions import package_version

if TYPE_CHECKING:
    from inferlab_bench.prepare.tokens.bounds import SegmentBound

_FINGERPRINT_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
)


class ChatTokenizer:
    """A model tokenizer as preparation uses it: exact chat-template token counts, plus a
    cheap, provable lower bound where the tokenizer's structure allows one."""

    _tok: Any
    _backend: Any
    _splitter: re.Pattern[str] | None
    _bound: SegmentBound | None
    _bound_made: bool
    _added: list[str] | None
    _encode: Any
    _plans: Plans | None
    _by_word: WordCounter | None
    _checked: int
    word_counts_differed: bool

    def __init__(self, locator: str, template_kwargs: Mapping[str, Any] | None = None) -> None:
        """Starts loading on a background thread, so that loading overlaps whatever the
        caller does next (reading the dataset); the first use waits for it, and a load
        failure is raised there."""
        self.locator = locator
        self.template_kwargs = dict(template_kwargs or {})
        self._loading: Background | None = Background(lambda: _load(locator))

    @classmethod
    def from_backend(
        cls,
        locator: str,
        template_kwargs: Mapping[str, Any] | None,
        backend: Any,
        added: list[str] | None,
        plans: Plans | None,
    ) -> ChatTokenizer:
        """A tokenizer kept by ``store``: AutoTokenizer's backend read back without
        transformers, its added tokens as they were judged, and verified template plans.
        It counts like the one it was kept from; it renders only what a verified plan
        covers (``planned``), and ``render`` refuses anything else."""
        self = cls.__new__(cls)
        self.locator = locator
        self.template_kwargs = dict(template_kwargs or {})
        self._loading = None
        self._install(None, backend, added, plans)
        return self

    def ready(self) -> None:
        """Wait for the load. Call before forking, so that children inherit a loaded
        tokenizer and no thread in the middle of an import."""
        if self._loading is None:
            return
        loading, self._loading = self._loading, None
        tok = loading.result()
        backend = getattr(tok, "backend_tokenizer", None)
        added = _plain_added_tokens(tok, backend)
        self._install(tok, backend, added, Plans.for_tokenizer(tok, self.template_kwargs))

    def _install(self, tok: Any, backend: Any, added: list[str] | None, plans: Any) -> None:
        self._tok = tok
        self._backend = backend
        self._added = added
        self._splitter = None if added is None else added_token_splitter(added)
        self._bound, self._bound_made = None, False  # counting alone never needs it
        self._encode = _batch_encoder(backend)
        self._by_word = None if added is None else WordCounter.for_backend(backend)
        self._checked = 0
        self.word_counts_differed = False
        self._plans = plans

    @property
    def transformers_tokenizer(self) -> Any | None:
        """The AutoTokenizer this was loaded through (None when kept by ``store``)."""
        self.ready()
        return self._tok

    @property
    def added_tokens(self) -> list[str] | None:
        """The added tokens cut out verbatim (see ``split_segments``), or None."""
        self.ready()
        return self._added

    @property
    def plans(self) -> Plans | None:
        self.ready()
        return self._plans

    def make_bounds(self) -> None:
        """Prepare the segment bounds now (before forking, so workers inherit them; made
        on first use otherwise: a warm preparation that only counts never needs them)."""
        self.ready()
        self._segment_bound()

    def _segment_bound(self) -> SegmentBound | None:
        if not self._bound_made:
            from inferlab_bench.prepare.tokens.bounds import SegmentBound  # numpy: only for bounds

            added = self._added
            self._bound = None if added is None else SegmentBound.for_backend(self._backend, added)
            self._bound_made = True
        return self._bound

    def planned(self, messages: Sequence[Mapping[str, str]]) -> str | None:
        """``messages`` rendered from a plan verified earlier, or None (no real render)."""
        self.ready()
        return None if self._plans is None else self._plans.verified_text(messages)

    def render(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The chat template applied to ``messages``, as ``apply_chat_template`` gives it.

        Most renders come from a plan made once per message shape (see ``template.Plans``); the
        first use of each plan is checked against a real render.
        """
        self.ready()
        if self._plans is None:
            return self._render(messages)
        text = self._plans.text(messages)
        if text is None:
            return self._render(messages)
        if self._plans.unverified(messages):
            real = self._render(messages)
            self._plans.verified(messages, real == text)
            return real
        return text

    def render_context(self, messages: Sequence[Mapping[str, str]]) -> str:
        """``messages`` rendered as a finished context, without the generation prompt (a
        history that ends with an assistant reply, as a server holds it after that reply);
        always a real ``apply_chat_template``."""
        self.ready()
        return self._render(messages, add_generation_prompt=False)

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The token ids of already-rendered texts (no special tokens added), batched:
        the ids whose lengths ``count_texts`` gives."""
        self.ready()
        if not texts:
            return []
        if self._encode is not None:
            return [list(e.ids) for e in self._encode(list(texts), add_special_tokens=False)]
        return [list(self._tok(t, add_special_tokens=False)["input_ids"]) for t in texts]

    def _render(
        self, messages: Sequence[Mapping[str, str]], *, add_generation_prompt: bool = True
    ) -> str:
        if self._tok is None:
            raise TokenizerError(
                f"{self.locator}: no verified template plan for {len(messages)} messages "
                "in the kept tokenizer (a bug: the caller must load the real one)"
            )
        try:
            text = self._tok.apply_chat_template(
                list(messages),
                add_generation_prompt=add_generation_prompt,
                tokenize=False,
                **self.template_kwargs,
            )
        except Exception as exc:  # jinja errors, missing template: all one failure to the user
            raise TokenizerError(f"{self.locator}: chat template failed: {exc}") from exc
        return str(text)

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Exact token counts of already-rendered texts (no special tokens added), batched.

        Texts are counted by word where ``pretoken`` mirrors the tokenizer
        exactly; the first ``pretoken.CHECKED`` characters so counted are also encoded, and one
        difference turns that path off for good (``word_counts_differed``) and has every
        text of this call encoded.
        """
        self.ready()
        fast = [self._word_count(t) for t in texts] if self._by_word is not None else []
        if not any(c is not None for c in fast):
            return self._encode_counts(texts)
        rest = [t for t, c in zip(texts, fast, strict=True) if c is None]
        encoded = iter(self._encode_counts(rest))
        counts = [next(encoded) if c is None else c for c in fast]
        if self._checked < pretoken.CHECKED and not self._agrees(texts, fast, counts):
            return self._encode_counts(texts)
        return counts

    def learn_characters(self, texts: list[str]) -> None:
        """Decide now which non-ASCII characters of ``texts`` may be counted by word (see
        ``pretoken.WordCounter.learn_characters``); the counts do not change."""
        self.ready()
        if self._by_word is not None:
            self._by_word.learn_characters(texts)

    def remember_words(self, memory: WordMemory) -> None:
        """Counts and verdicts this backend gave in earlier runs (see ``pretoken``)."""
        self.ready()
        if self._by_word is not None:
            self._by_word.remember(memory)

    def absorb_words(self, memory: WordMemory) -> None:
        """What a forked child learned while counting, as if learned here."""
        if self._by_word is not None:
            self._by_word.absorb(memory)

    def learned_words(self) -> WordMemory | None:
        """What counting by word learned in this process beyond ``remember_words``; None
        when it does not count by word (or turned that off after a difference)."""
        self.ready()
        return None if self._by_word is None else self._by_word.learned()

    def take_learned_words(self) -> WordMemory | None:
        """``learned_words``, then forgotten as learned (they stay known): each call returns
        only what was learned since the last one."""
        learned = self.learned_words()
        if self._by_word is not None:
            self._by_word.forget_learned()
        return learned

    def word_memory(self) -> WordMemory | None:
        """What the next run may ``remember_words``: None as for ``learned_words``, and
        when nothing was learned since ``remember_words``."""
        learned = self.learned_words()
        if self._by_word is None or learned is None or not (learned.words or learned.chars):
            return None
        return self._by_word.memory()

    def _word_count(self, text: str) -> int | None:
        if self._splitter is None or self._by_word is None:
            return None
        return count_by_word(self._by_word, self._splitter, text)

    def _agrees(self, texts: Sequence[str], fast: list[int | None], counts: list[int]) -> bool:
        """Encode the texts counted by word until ``pretoken.CHECKED`` characters are
        checked; on a difference, counting by word is off for good (a word count kept by an
        earlier run may be what differs, so ``store`` then forgets them)."""
        accepted = []
        for i, c in enumerate(fast):
            if c is not None and self._checked < pretoken.CHECKED:
                accepted.append(i)
                self._checked += len(texts[i])
        real = self._encode_counts([texts[i] for i in accepted])
        if all(counts[i] == n for i, n in zip(accepted, real, strict=True)):
            return True
        self._by_word = None  # never again in this process
        self.word_counts_differed = True
        return False

    def _encode_counts(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        if self._encode is not None:
            encoded = self._encode(list(texts), add_special_tokens=False)
            return [len(encoding) for encoding in encoded]
        return [len(self._tok(t, add_special_tokens=False)["input_ids"]) for t in texts]

    def upper_bound(self, segment: str) -> int | None:
        """A number never below the segment's count; None when no bound is proved."""
        self.ready()
        bound = self._segment_bound()
        return None if bound is None else bound.at_most(segment)

    def target_at_least(self, text: str) -> int:
        """A number never above ``text``'s count (encoded without special tokens); 0 when
        no bound is proved. Each added token is one token, each other segment at least one
        (``bounds``), so most targets are proved to have two without being encoded."""
        self.ready()
        split = self.split_segments(text)
        bound = self._segment_bound()
        if bound is None or split is None:
            return 0
        segments, added = split
        return added + sum(bound.at_least(segment) for segment in segments)

    def lower_bound(self, segment: str, room: int) -> int:
        """A number never above the segment's count; 0 when no bound is provable or when
        the bound could not exceed ``room`` anyway (then it is not worth computing)."""
        self.ready()
        bound = self._segment_bound()
        return 0 if bound is None else bound.of(segment, room)

    def split_segments(self, text: str) -> tuple[list[str], int] | None:
        """Cut ``text`` at added tokens the way the tokenizer does: (segments, #added tokens).

        Then count(text) = #added tokens + sum(count(segment)) exactly: the tokenizer cuts
        added tokens out before normalizing, pre-tokenizing and modelling each piece alone,
        so nothing merges across a cut. None when this tokenizer's added tokens are matched
        in ways we do not mirror (normalized, stripping, single-word), or it truncates or
        pads, or there is no fast backend.
        """
        self.ready()
        return None if self._splitter is None else cut_at_added(self._splitter, text)

    def pieces(self, text: str) -> list[tuple[str, bool]] | None:
        """``text`` cut as ``split_segments`` cuts it, keeping the added tokens in place:
        ``(piece, is_added_token)`` in order, empty segments left out. The text's ids are
        then the concatenation of each piece's ids encoded alone; None as for
        ``split_segments``."""
        self.ready()
        if self._splitter is None:
            return None
        found, position = [], 0
        for match in self._splitter.finditer(text):
            if match.start() > position:
                found.append((text[position : match.start()], False))
            found.append((match.group(), True))
            position = match.end()
        if position < len(text):
            found.append((text[position:], False))
        return found


def fingerprint(locator: str) -> str:
    """sha256 over the tokenizer's files (they hold the chat template) and library versions.

    Read from the files alone, so a warm preparation never loads the tokenizer; each file's
    digest comes through its stamp (``stamp``: trusted only while the file provably is the
    one hashed, as the dataset's is), which spares a warm run hashing the 7 MB
    ``tokenizer.json`` (0.03 s).
    """
    directory = Path(locator)
    if not directory.is_dir():
        raise TokenizerError(
            f"model.locator {locator!r}: not a local tokenizer directory",
            hint="point model.locator at a directory with tokenizer.json / tokenizer_config.json",
        )
    digest = hashlib.sha256()
    for name in _FINGERPRINT_FILES:
        path = directory / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + bytes.fromhex(file_digest(path).sha256))
    for package in ("transformers", "tokenizers"):
        digest.update(f"{package}={package_version(package)}".encode())
    return digest.hexdigest()


def _load(locator: str) -> Any:
    return load_tokenizer(locator)


def _batch_encoder(backend: Any) -> Any:
    """The backend's fastest batch encode: ``encode_batch_fast`` skips offset tracking,
    which we never read (tokenizers >= 0.21); the ids, and so the counts, are the same."""
    if backend is None:
        return None
    return getattr(backend, "encode_batch_fast", None) or backend.encode_batch


def _plain_added_tokens(tok: Any, backend: Any) -> list[str] | None:
    """The added tokens' contents when the backend cuts them out verbatim before anything
    else, so that splitting on them ourselves is exact; None otherwise.

    Verbatim means: not normalized, no lstrip/rstrip/single-word matching, special tokens
    not encoded as text, and no truncation or padding that would make a whole text count
    differently from the sum of its pieces.
    """
    if backend is None or backend.truncation is not None or backend.padding is not None:
        return None
    if getattr(backend, "encode_special_tokens", False):
        return None
    added = list(getattr(tok, "added_tokens_decoder", {}).values())
    if any(a.normalized or a.lstrip or a.rstrip or a.single_word for a in added):
        return None
    return [a.content for a in added]


def count_by_word(counter: WordCounter, splitter: re.Pattern[str], text: str) -> int | None:
    """``text``'s count by word: cut at added tokens (``ChatTokenizer.split_segments``),
    one token per added token plus each segment's count; None if a segment has none."""
    segments, total = cut_at_added(splitter, text)
    for segment in segments:
        count = counter.count(segment)
        if count is None:
            return None
        total += count
    return total


def cut_at_added(splitter: re.Pattern[str], text: str) -> tuple[list[str], int]:
    """The non-empty segments between ``text``'s added tokens, and how many there are."""
    pieces = splitter.split(text)
    return [p for p in pieces if p], len(pieces) - 1


def added_token_splitter(contents: list[str]) -> re.Pattern[str]:
    """Leftmost-longest over the added tokens, as the backend matches them. With no added
    tokens, a pattern that cannot occur in text keeps every text one segment."""
    if not contents:
        return re.compile(r"(?!)")
    ordered = sorted(set(contents), key=len, reverse=True)
    return re.compile("|".join(map(re.escape, ordered)))


class PrefixCounter:
    """``CountUpTo`` for one conversation: counts by segments, stops once past the limit.

    count(text) = #added tokens + sum(count(segment)) (see ``split_segments``). Segments
    repeat across the candidate inputs of one conversation and are counted once. A
    candidate that looks too long is first checked with lower bounds (``bounds``): known
    counts plus the bounds of the rest already past the limit means it is never tokenized.
    One that looks short is checked with upper bounds: known counts plus the bounds of the
    rest within the limit means it fits, and it is not counted (None) until it is chosen.
    Otherwise unknown segments are encoded in one batch per step, as many as are likely to
    fit the room left (a guess from the tokens per character seen so far; it only decides
    the batch size, never a count), so a long tail past the limit is rarely tokenized.
    """

    def __init__(self, tokenizer: ChatTokenizer, rate: TokenRate | None = None) -> None:
        self._tok = tokenizer
        self._rate = rate or TokenRate()
        self._counts: dict[str, int] = {}
        self._bounds: dict[str, int] = {}

    def __call__(self, messages: list[dict[str, str]], limit: int) -> int | None:
        text = self._tok.render(messages)
        split = self._tok.split_segments(text)
        if split is None:
            return self._tok.count_texts([text])[0]
        segments, total = split
        if self._looks_too_long(segments, total, limit):
            bounded = self._bounded_past(segments, total, limit)
            if bounded > limit:
                return bounded  # provably too long: never tokenized
        elif self._fits(segments, total, limit):
            return None  # provably fits: counted only if chosen
        for position, segment in enumerate(segments):
            if total > limit:
                return total
            count = self._counts.get(segment)
            if count is None:
                bound = self._at_least(segment, limit - total)
                if bound > limit - total:
                    return total + bound  # provably too long: never tokenized
                self._fetch(segments, position, limit - total)
                count = self._counts[segment]
            total += count
        return total

    def _looks_too_long(self, segments: list[str], total: int, limit: int) -> bool:
        """A guess (it only decides whether bounds are worth computing)."""
        ratio = self._rate.per_char()
        for segment in segments:
            known = self._counts.get(segment)
            total += known if known is not None else int(len(segment) * ratio)
        return total > limit

    def _bounded_past(self, segments: list[str], total: int, limit: int) -> int:
        """Known counts plus lower bounds, summed until past ``limit`` (room 0: every
        segment's bound counts here, however short the segment)."""
        for segment in segments:
            total += self._at_least(segment, 0)
            if total > limit:
                break
        return total

    def _fits(self, segments: list[str], total: int, limit: int) -> bool:
        """Known counts plus upper bounds of the rest within ``limit`` (False if unproved,
        and False when every count is known: then the exact sum is at hand)."""
        bounded = False
        for segment in segments:
            known = self._counts.get(segment)
            if known is None:
                known = self._tok.upper_bound(segment)
                if known is None:
                    return False
                bounded = True
            total += known
            if total > limit:
                return False
        return bounded

    def _at_least(self, segment: str, room: int) -> int:
        """The exact count if known, else a lower bound (0 if not worth computing)."""
        count = self._counts.get(segment)
        if count is not None:
            return count
        bound = self._bounds.get(segment)
        if bound is None:
            bound = self._bounds[segment] = self._tok.lower_bound(segment, room)
        return bound

    def _fetch(self, segments: list[str], start: int, room: int) -> None:
        """Count ``segments[start]`` and the unknown ones after it likely to fit in ``room``."""
        ratio = self._rate.per_char()
        batch: dict[str, None] = {}  # ordered and deduplicated
        expected = 0.0
        for segment in segments[start:]:
            if segment in self._counts or segment in batch:
                continue
            if batch and expected + len(segment) * ratio > room:
                break
            batch[segment] = None
            expected += len(segment) * ratio
        for segment, count in zip(batch, self._tok.count_texts(list(batch)), strict=True):
            self._counts[segment] = count
            self._rate.add(len(segment), count)


class TokenRate:
    """Tokens per character seen so far, shared by the counters of one worker: a guess of
    how much text fits the room left, used only to size encode batches."""

    def __init__(self) -> None:
        self._chars = 300  # a prior of 1 token per 3 characters, soon outweighed
        self._tokens = 100

    def per_char(self) -> float:
        return self._tokens / self._chars

    def add(self, chars: int, tokens: int) -> None:
        self._chars += chars
        self._tokens += tokens

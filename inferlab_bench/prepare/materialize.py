"""Pure rules of ``sharegpt-single-request-v1``: which conversation gives which single request.

Per conversation: map roles, require strict user/assistant alternation, pick the latest
assistant message whose preceding input is non-blank and fits ``max_input_tokens``
(stepping back whole exchanges, never cutting a message), then check the target.
Token counts come from outside (``tokenize``); this module never sees a tokenizer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MATERIALIZATION_IDENTITY = "sharegpt-single-request-v1"
RULES_VERSION = 2
"""Bumped whenever a rule changes, so cached token tables are not reused across rules."""

ROLE_MAP = {"human": "user", "gpt": "assistant"}


class Reason(enum.StrEnum):
    INVALID_CONVERSATION = "invalid_conversation"
    MISSING_ASSISTANT_TARGET = "missing_assistant_target"
    INPUT_EXCEEDS_MAXIMUM = "input_exceeds_maximum"
    EMPTY_ASSISTANT_TARGET = "empty_assistant_target"
    TARGET_SHORTER_THAN_TWO_TOKENS = "assistant_target_shorter_than_two_tokens"


@dataclass(frozen=True)
class Conversation:
    """A structurally valid conversation: alternating (role, content), user first."""

    index: int
    source_id: str
    messages: tuple[tuple[str, str], ...]

    def chat(self, end: int) -> list[dict[str, str]]:
        """The first ``end`` messages as chat-template messages."""
        return [{"role": role, "content": content} for role, content in self.messages[:end]]


def source_id(index: int, record: Any) -> str:
    value = record.get("id") if isinstance(record, Mapping) else None
    return value if isinstance(value, str) else f"row-{index}"


def parse_conversation(index: int, record: Any) -> Conversation | Reason:
    """Role mapping and alternation; ``Reason`` when the record cannot give a request."""
    turns = record.get("conversations") if isinstance(record, Mapping) else None
    if not isinstance(turns, list):
        return Reason.INVALID_CONVERSATION
    messages = []
    for position, turn in enumerate(turns):
        speaker = turn.get("from") if isinstance(turn, Mapping) else None
        role = ROLE_MAP.get(speaker) if isinstance(speaker, str) else None  # lists: unhashable
        value = turn.get("value") if isinstance(turn, Mapping) else None
        expected = "user" if position % 2 == 0 else "assistant"
        if role != expected or not isinstance(value, str):
            return Reason.INVALID_CONVERSATION
        messages.append((role, value))
    if len(messages) < 2 or messages[-1][0] != "assistant":
        return Reason.MISSING_ASSISTANT_TARGET
    return Conversation(index, source_id(index, record), tuple(messages))


def candidate_ends(conversation: Conversation) -> list[int]:
    """Input lengths to try, latest first: each ends before an assistant message, after a
    non-blank user message. (Blank-user candidates are stepped over without counting.)"""
    ends = range(len(conversation.messages) - 1, 0, -2)
    return [end for end in ends if conversation.messages[end - 1][1].strip()]


@dataclass(frozen=True)
class Choice:
    """The chosen split: input = messages[:end] with its exact token count, or None when
    an upper bound proved it fits without counting it."""

    end: int
    input_tokens: int | None


CountUpTo = Callable[[list[dict[str, str]], int], int | None]
"""``count(messages, limit)``: the exact chat-template token count when it is <= limit,
or None when the count is proved <= limit without being known; otherwise any number
above limit (so a counter may stop early)."""


def choose_input(
    conversation: Conversation, count: CountUpTo, max_input_tokens: int
) -> Choice | Reason:
    """The latest non-blank input that fits, stepping back one whole exchange at a time."""
    for end in candidate_ends(conversation):
        tokens = count(conversation.chat(end), max_input_tokens)
        if tokens is None or tokens <= max_input_tokens:
            return Choice(end, tokens)
    return Reason.INPUT_EXCEEDS_MAXIMUM


UNCOUNTED = -1
"""A token count that was not needed: an upper bound proved the input fits, or a lower
bound proved the target has at least two tokens. Counted once the entry is chosen."""


def target_reason(target_text: str, target_tokens: int) -> Reason | None:
    """``target_tokens`` may be ``UNCOUNTED`` (proved >= 2)."""
    if not target_text.strip() or target_tokens == 0:
        return Reason.EMPTY_ASSISTANT_TARGET
    return None


def output_length(target_tokens: int, fixed_output_tokens: int | None) -> int | Reason:
    """The request's output length, or why the entry is not admitted (from an exact count:
    chosen entries are counted before this is asked)."""
    if fixed_output_tokens is not None:
        return fixed_output_tokens
    if target_tokens < 2:
        return Reason.TARGET_SHORTER_THAN_TWO_TOKENS
    return target_tokens

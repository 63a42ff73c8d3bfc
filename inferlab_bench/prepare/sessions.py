"""Pure rules of ``sharegpt-multi-turn-v1``: which conversation gives which session of turns.

A conversation (parsed and checked as for ``sharegpt-single-request-v1``: roles mapped,
strict alternation from user, ending with an assistant) is a list of exchanges; turn ``k``
sends every message before assistant message ``2k+1`` (the whole history, ending with user
message ``2k``) and expects the dataset's reply ``2k+1`` as its target. The session is the
longest run of turns from the start in which every turn:

- has a non-blank user message (else ``empty_user_message``),
- renders (chat template, generation prompt) within ``max_input_tokens``
  (else ``input_exceeds_maximum``),
- has a target that passes the single-request checks (``materialize.target_reason`` and,
  without a fixed output length, at least two tokens).

The first turn that fails ends the session (later turns would send a history the earlier
turns never did). A session needs at least ``MIN_TURNS`` turns; a conversation with fewer
exchanges is ``fewer_than_two_turns``, one whose run stops earlier takes the reason of the
turn that stopped it. Token counts come from outside; this module never sees a tokenizer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from inferlab_bench.prepare.materialize import Conversation, CountUpTo, Reason
from inferlab_bench.tokenizer import common_prefix_length

MATERIALIZATION_IDENTITY = "sharegpt-multi-turn-v1"
SCHEMA_VERSION = 1
"""The conversation population's manifest schema (its own, apart from single requests')."""
MIN_TURNS = 2


class SessionReason(enum.StrEnum):
    """Why a conversation gives no session, beyond the single-request reasons."""

    FEWER_THAN_TWO_TURNS = "fewer_than_two_turns"
    EMPTY_USER_MESSAGE = "empty_user_message"


def turn_input_end(turn: int) -> int:
    """Turn ``turn`` sends ``messages[:end]``: the history up to its user message."""
    return 2 * turn + 1


def exchanges(conversation: Conversation) -> int:
    """How many (user, assistant) exchanges the conversation has: its possible turns."""
    return len(conversation.messages) // 2


TargetCheck = Callable[[str], Reason | None]
"""``check(target_text)``: why this target cannot be a turn's, or None (the tokenizer's part
of ``materialize.target_reason`` and ``output_length``, applied by the caller)."""


@dataclass(frozen=True)
class Session:
    """The admitted run of turns: ``turns`` of them; per turn the input count when one was
    made (None: an upper bound proved it fits; counted once the session is chosen)."""

    turns: int
    input_tokens: tuple[int | None, ...]
    stopped_by: str | None
    """Why the run ended before the conversation did (None: every exchange is a turn)."""


def choose_session(
    conversation: Conversation,
    count: CountUpTo,
    target_check: TargetCheck,
    max_input_tokens: int,
) -> Session | str:
    """The session of ``conversation``, or the reason (a ``Reason`` or ``SessionReason``
    value) it has none."""
    if exchanges(conversation) < MIN_TURNS:
        return SessionReason.FEWER_THAN_TWO_TURNS.value
    counts: list[int | None] = []
    stopped: str | None = None
    for turn in range(exchanges(conversation)):
        stopped = _turn_reason(conversation, turn, count, target_check, max_input_tokens, counts)
        if stopped is not None:
            break
    if len(counts) < MIN_TURNS:
        assert stopped is not None
        return stopped
    return Session(len(counts), tuple(counts), stopped)


def _turn_reason(
    conversation: Conversation,
    turn: int,
    count: CountUpTo,
    target_check: TargetCheck,
    max_input_tokens: int,
    counts: list[int | None],
) -> str | None:
    """None when turn ``turn`` is admitted (its input count appended to ``counts``)."""
    end = turn_input_end(turn)
    if not conversation.messages[end - 1][1].strip():
        return SessionReason.EMPTY_USER_MESSAGE.value
    tokens = count(conversation.chat(end), max_input_tokens)
    if tokens is not None and tokens > max_input_tokens:
        return Reason.INPUT_EXCEEDS_MAXIMUM.value
    target = conversation.messages[end][1]
    if not target.strip():
        return Reason.EMPTY_ASSISTANT_TARGET.value
    reason = target_check(target)
    if reason is not None:
        return reason.value
    counts.append(tokens)
    return None


def reusable_prefix(previous_context: Sequence[int], current_input: Sequence[int]) -> int:
    """How many leading tokens ``current_input`` shares with ``previous_context`` (the
    previous turn's input followed by its reply, rendered as an assistant message): the
    part of this turn a server's prefix cache can reuse."""
    return common_prefix_length(previous_context, current_input)

"""The extraction spec step 1 and its privacy rule: the last messages as ``[role] content``.

``<private>…</private>`` is stripped before anything else sees the text; a message
that was entirely private is left out of the snapshot.

Crash consistency (:func:`apply_turn`): the session state records each applied turn with
its partition and offset. A turn redelivered after a crash (one of those, or one before every
turn the state still keeps but not before the session's first, see :func:`_too_old_to_tell`)
changes nothing and yields the window as of itself, rebuilt from that record, so the snapshot
it produced the first time is produced again, identical (same id, same text), never a window
with the turn applied twice or paired with a later question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import msgspec

from memstream.identity import derived_id
from memstream.schemas import AppliedTurn, Message, Provenance, SessionState
from memstream.schemas.events import Role

_PRIVATE_BLOCK = re.compile(r"<private>.*?</private>", re.IGNORECASE | re.DOTALL)
#: An opening tag never closed hides everything after it: failing closed is the safe side.
_PRIVATE_UNCLOSED = re.compile(r"<private>.*\Z", re.IGNORECASE | re.DOTALL)
_TRUNCATION_MARK = " …[truncated]"


def strip_private(text: str) -> str:
    """Remove private spans; returns "" when nothing public is left."""
    text = _PRIVATE_BLOCK.sub("", text)
    text = _PRIVATE_UNCLOSED.sub("", text)
    text = re.sub(r"</private>", "", text, flags=re.IGNORECASE)
    return text.strip()


def public_message(message: Message) -> Message | None:
    """The message with private spans removed, or None if it was fully private."""
    content = strip_private(message.content)
    return Message(message.role, content, message.provenance) if content else None


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    if limit <= len(_TRUNCATION_MARK):
        return text[:limit]
    return text[: limit - len(_TRUNCATION_MARK)] + _TRUNCATION_MARK


#: What stands in for the middle of a message the session state keeps cut to the message limit.
_MIDDLE_MARK = " […] "


def cut_middle(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, its middle cut: a long message's head and tail say what it asks
    and what it concludes (a final report ends with what was changed), so both are kept."""
    if len(text) <= limit:
        return text
    if limit <= len(_MIDDLE_MARK):
        return text[:limit]
    keep = limit - len(_MIDDLE_MARK)
    front = keep - keep // 2
    return text[:front] + _MIDDLE_MARK + text[len(text) - keep // 2 :]


def window(messages: Sequence[Message], new: Message, size: int) -> list[Message]:
    """The session's last ``size`` public messages after ``new`` arrives."""
    public = public_message(new)
    kept = [*messages, public] if public is not None else list(messages)
    return kept[-size:]


def format_snapshot(messages: Sequence[Message], *, message_max_chars: int, max_chars: int) -> str:
    """``[role] content`` per message, newest last; the oldest text is cut first."""
    lines = [f"[{m.role}] {truncate(m.content, message_max_chars)}" for m in messages]
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = text[len(text) - max_chars :]
    return text


def exchange_start(messages: Sequence[Message]) -> int:
    """Where the last exchange begins: the first of the user messages since the previous assistant
    reply (user turns sent back to back belong to one exchange; none of them may be left out)."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
    replied = [i for i, m in enumerate(messages[:last_user]) if m.role == "assistant"]
    return replied[-1] + 1 if replied else 0 if any(m.role == "user" for m in messages) else last_user


def last_exchange(messages: Sequence[Message], *, message_max_chars: int) -> str:
    """The user messages since the previous reply and everything after them: the turn raw mode stores."""
    return format_snapshot(messages[exchange_start(messages) :], message_max_chars=message_max_chars, max_chars=10**9)


def pending_is_due(
    messages: Sequence[Message], last_seen: float, flushed: bool, now: float, idle: float, *, ended: bool = False
) -> bool:
    """Should user turns that got no reply be stored now? When the session ends on the user
    (nothing arrived for ``idle`` seconds of processing time, or its host said it ``ended``)
    and they were not stored yet.

    Processing time, not the turns' own timestamps: a replay of old turns must not see a
    session as idle between a user turn and its reply."""
    waiting = bool(messages) and messages[-1].role == "user" and not flushed
    return waiting and (ended or now - last_seen >= idle)


def ends_applied(state: SessionState, role: str, provenance: Provenance | None) -> bool:
    """Is a turn that ends the session (``Turn.ends_session``) one this session has applied already?

    A host's ``SessionEnd`` often comes after its last ``Stop`` has taken every message: capture then
    sends the session's last turn again, marked as its end, so that the questions it ended on are stored
    now rather than after the idle window (issue 37). It is the same message when it names the same place
    (CLI, session, file and line): then it ends the session and is not applied a second time."""
    if provenance is None or not provenance.file:
        return False
    place = (provenance.source_type, provenance.session_id, provenance.file, provenance.line)
    return any(
        t.role == role
        and t.provenance is not None
        and (t.provenance.source_type, t.provenance.session_id, t.provenance.file, t.provenance.line) == place
        for t in history(state)
    )


def lineage_of(ts: datetime, role: str, content: str) -> str:
    """The salt of the ids of a session state started by this turn (see ``SessionState.lineage``).

    Derived from the turn alone, so a state lost before its first write was durable, and started
    again by the same turn redelivered, gets the same ids; a state started afresh later in the
    session, by a later turn, gets others."""
    return derived_id("lineage", ts.isoformat(), role, content)


def carried_over(state: SessionState) -> SessionState:
    """A session's state as a fresh broker's table is given it (memstream.worker.recycle): its
    turns keep their window and counts but forget where they were read, since the fresh broker's
    offsets start again at 0 and a new turn read at an old one's place would pass for a redelivery."""
    turns = [msgspec.structs.replace(turn, offset=-1) for turn in history(state)]
    return msgspec.structs.replace(state, messages=[], applied=turns, first_applied=[])


def exchange_id(session_id: str, base: int, lineage: str = "") -> str:
    """The identity of a session's exchange of this base ("" when the base is unknown)."""
    if base < 0:
        return ""
    return derived_id(session_id, *([lineage] if lineage else []), "exchange", str(base))


def snapshot_id(session_id: str, lineage: str, turns: int, mode: str, mark: str = "") -> str:
    """The identity of a session's snapshot after ``turns`` assistant turns, in this mode."""
    return derived_id(session_id, *([lineage] if lineage else []), str(turns), mode, *([mark] if mark else []))


def exchange_sources(messages: Sequence[Message]) -> list[Provenance]:
    """Where the messages of the last exchange came from, oldest first, each source once."""
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
    sources: list[Provenance] = []
    for message in messages[start:]:
        if message.provenance is not None and message.provenance not in sources:
            sources.append(message.provenance)
    return sources


def is_summary_turn(assistant_turn: int, every: int) -> bool:
    """The extraction spec: summary mode is triggered every N assistant turns (default 5)."""
    return assistant_turn > 0 and assistant_turn % every == 0


def snapshot_modes(assistant_turn: int, *, raw: bool, summary_every: int) -> list[str]:
    """Which snapshots an assistant turn produces: normal after every turn, plus summary
    every N turns; raw mode (no LLM) stores the exchange itself and never summarizes."""
    if raw:
        return ["raw"]
    modes = ["normal"]
    if is_summary_turn(assistant_turn, summary_every):
        modes.append("summary")
    return modes


#: Turns per session whose snapshot a redelivery can rebuild: more than one session's turns
#: between two offset commits (Faust commits every 2.8 s). Older ones are skipped when
#: redelivered, as applied long ago. Kept cut to the message limit, so the state of a
#: session stays under (8 + this) x ``MEMSTREAM_MESSAGE_MAX_CHARS``.
REDELIVERY_KEEP = 16


@dataclass(frozen=True)
class Applied:
    """The outcome of one turn: the new state, and the window a snapshot is built from."""

    state: SessionState
    #: The session's last public messages as of this turn, when it is an assistant turn
    #: with something to snapshot; None when no snapshot is due.
    messages: list[Message] | None
    #: The session's assistant-turn count as of this turn.
    assistant_turns: int
    #: True when the turn was applied before (a redelivery); the state is unchanged.
    redelivered: bool = False
    #: The exchange the turn belongs to as of this turn, from its first user message on (as far as
    #: the state keeps it), and its base (see :func:`exchange_as_of`); None and -1 when unknown.
    exchange: list[Message] | None = None
    exchange_base: int = -1


def history(state: SessionState) -> list[AppliedTurn]:
    """The applied turns of a state; a state from before offsets were kept has its messages
    as turns of unknown offset (never taken for a redelivery)."""
    if state.applied or not state.messages:
        return list(state.applied)
    return [
        AppliedTurn(
            partition=-1,
            offset=-1,
            role=m.role,
            content=m.content,
            assistant_turns=state.assistant_turns,
            provenance=m.provenance,
        )
        for m in state.messages
    ]


def current_window(state: SessionState, size: int) -> list[Message]:
    """The session's last ``size`` public messages now."""
    turns = history(state)
    return _window_as_of(turns, len(turns) - 1, size)


def exchange_as_of(turns: Sequence[AppliedTurn], index: int) -> tuple[list[Message] | None, int]:
    """The messages of the exchange turn ``index`` belongs to, up to it, and the exchange's base.

    An exchange is a user's question (user messages sent back to back) and everything after it
    until the next question; its base is the session's assistant-turn count when it began, the
    same on each of its turns. Not bounded by the snapshot window: a reply of many messages keeps
    its question (as far as the state keeps turns, ``REDELIVERY_KEEP`` and a window's worth).
    (None, -1) for turns applied before the base was kept.
    """
    base = turns[index].exchange if 0 <= index < len(turns) else -1
    if base < 0:
        return None, -1
    messages = [
        Message(t.role, t.content, t.provenance) for t in turns[: index + 1] if t.exchange == base and t.content
    ]
    return messages, base


def current_exchange(state: SessionState) -> tuple[list[Message] | None, int]:
    """The session's current exchange and its base (see :func:`exchange_as_of`)."""
    turns = history(state)
    return exchange_as_of(turns, len(turns) - 1)


def _exchange_base(last: AppliedTurn | None, role: Role, assistant_turns_before: int) -> int:
    """The base of the exchange a new turn belongs to: a user message after a reply (or first in the
    session) opens an exchange at the count so far; back-to-back user messages share one (the count
    has not moved between them); anything else continues the exchange of the turn before it."""
    if role == "user" or last is None:
        return assistant_turns_before
    return last.exchange


def _window_as_of(turns: Sequence[AppliedTurn], index: int, size: int) -> list[Message]:
    return [Message(t.role, t.content, t.provenance) for t in turns[: index + 1] if t.content][-size:]


def _trim(turns: list[AppliedTurn], size: int, keep: int) -> list[AppliedTurn]:
    """The last ``keep`` turns, and before them as many as the first one's window needs; and the question
    of the exchange going on, whatever its length.

    An agent that works long writes many messages before its final answer: without its question the
    exchange's memory would be replies alone (issue 37). The question is kept as a copy whose place is
    unknown (partition and offset -1): :func:`_too_old_to_tell` judges redeliveries by the places of the
    turns kept in order, and a copy never passes for one of them."""
    if len(turns) <= keep:
        return turns
    start = len(turns) - keep
    public = 0
    while start > 0 and public < size:
        start -= 1
        public += 1 if turns[start].content else 0
    current = turns[-1].exchange
    question = [t for t in turns[:start] if current >= 0 and t.exchange == current and t.role == "user"]
    pinned = [msgspec.structs.replace(t, partition=-1, offset=-1) for t in question]
    return [*pinned, *turns[start:]]


def _too_old_to_tell(state: SessionState, turns: Sequence[AppliedTurn], partition: int, offset: int) -> bool:
    """Is a turn not among those applied lately nonetheless a redelivery? Only when it lies before
    every turn the state still keeps from its partition (the state forgot what came that early),
    and not before the first turn the session ever applied there (nothing was applied before it).

    A turn between kept ones that is not among them was never applied: a rebalance passed it
    over (Faust skips the events fetched before it) while later turns of the session were applied,
    and it came again when the partition was read from its committed offset. Taken for a
    redelivery, it was acked and committed without a snapshot, and its exchange was lost; so was
    a session's first exchange passed over so, below every turn the session kept."""
    kept = [t.offset for t in turns if t.partition == partition and t.offset >= 0]
    if not kept or not 0 <= offset < min(kept):
        return False
    first = state.first_applied
    return not (len(first) == 2 and first[0] == partition and offset < first[1])


def apply_turn(
    state: SessionState,
    *,
    partition: int,
    offset: int,
    role: Role,
    content: str,
    size: int,
    message_max_chars: int,
    provenance: Provenance | None = None,
    keep: int = REDELIVERY_KEEP,
    exact: bool = False,
) -> Applied:
    """Apply the turn read at ``partition``/``offset`` to a session's state (see the module doc).

    ``exact``: the coordinates are where the turn was first published, not where it was read (a
    turn published without its session key is read from the copy the stage re-published): it is
    a redelivery only if a turn applied lately has these very coordinates, since the original
    records of one session need not be in one partition, nor after the others it already has."""
    turns = history(state)
    last = turns[-1] if turns else None
    seen = any((t.partition, t.offset) == (partition, offset) for t in turns)
    if last is not None and (seen or (not exact and _too_old_to_tell(state, turns, partition, offset))):
        for index, applied in enumerate(turns):
            if (applied.partition, applied.offset) == (partition, offset):
                replayable = index >= len(turns) - keep
                messages = _window_as_of(turns, index, size) if replayable else []
                due = applied.role == "assistant" and bool(applied.content) and bool(messages)
                exchange, base = exchange_as_of(turns, index) if due else (None, -1)
                return Applied(
                    state,
                    messages if due else None,
                    applied.assistant_turns,
                    redelivered=True,
                    exchange=exchange,
                    exchange_base=base,
                )
        return Applied(state, None, last.assistant_turns, redelivered=True)
    before = last.assistant_turns if last else state.assistant_turns
    count = before + (1 if role == "assistant" else 0)
    public = public_message(Message(role, content))
    turn = AppliedTurn(
        partition=partition,
        offset=offset,
        role=role,
        content=cut_middle(public.content, message_max_chars) if public else "",
        assistant_turns=count,
        provenance=provenance,
        exchange=_exchange_base(last, role, before),
    )
    turns = _trim([*turns, turn], size, keep)
    messages = _window_as_of(turns, len(turns) - 1, size)
    # The other fields (what an idle flush needs) are the caller's to set.
    first = state.first_applied if state.first_applied or state.applied or state.messages else [partition, offset]
    if state.first_applied and state.first_applied[0] == partition and offset < state.first_applied[1]:
        first = [partition, offset]  # a turn passed over before the session's first, applied late
    new_state = msgspec.structs.replace(state, messages=[], assistant_turns=count, applied=turns, first_applied=first)
    # An answer with nothing public in it (empty, or all private) makes no snapshot: the
    # exchange would hold only the question.
    due = role == "assistant" and bool(turn.content)
    exchange, base = exchange_as_of(turns, len(turns) - 1) if due else (None, -1)
    return Applied(new_state, messages if due else None, count, exchange=exchange, exchange_base=base)


def legacy_state_of(state: SessionState, project: str, user: str) -> bool:
    """Is ``state``, kept under a bare session id (before the table's key named the tenant), the
    state of this project and user's session of that id? Only then does their next turn adopt it;
    another tenant's turn under the same id starts a window of its own."""
    return not state.session_id and (state.project, state.user) == (project, user)

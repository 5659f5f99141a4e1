"""Every turn reaches memory: the exchange starts at the first unanswered user turn, and user turns a
session ended on are due once it has been idle (processing time) and were not stored yet."""

from __future__ import annotations

from memstream.rules.snapshot import exchange_start, last_exchange, pending_is_due
from memstream.schemas import Message

U1, U2, A1, A0 = Message("user", "u1"), Message("user", "u2"), Message("assistant", "a1"), Message("assistant", "a0")


def test_back_to_back_user_turns_are_one_exchange() -> None:
    assert exchange_start([A0, U1, U2, A1]) == 1
    assert last_exchange([A0, U1, U2, A1], message_max_chars=100) == "[user] u1\n[user] u2\n[assistant] a1"
    assert exchange_start([U1, A1]) == 0
    assert exchange_start([U1, U2]) == 0


def test_unanswered_turns_are_due_after_the_idle_time_once() -> None:
    assert pending_is_due([A0, U1], last_seen=100.0, flushed=False, now=200.0, idle=60.0)
    assert not pending_is_due([A0, U1], last_seen=100.0, flushed=False, now=150.0, idle=60.0)  # not idle yet
    assert not pending_is_due([A0, U1], last_seen=100.0, flushed=True, now=200.0, idle=60.0)  # stored already
    assert not pending_is_due([U1, A1], last_seen=100.0, flushed=False, now=200.0, idle=60.0)  # answered
    assert not pending_is_due([], last_seen=0.0, flushed=False, now=200.0, idle=60.0)


def test_unanswered_turns_are_due_at_once_when_the_session_ended() -> None:
    assert pending_is_due([A0, U1], last_seen=100.0, flushed=False, now=100.0, idle=900.0, ended=True)
    assert not pending_is_due([A0, U1], last_seen=100.0, flushed=True, now=100.0, idle=900.0, ended=True)
    assert not pending_is_due([U1, A1], last_seen=100.0, flushed=False, now=100.0, idle=900.0, ended=True)

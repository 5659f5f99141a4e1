"""The extraction spec step 1 and its privacy rule: memstream.rules.snapshot."""

from __future__ import annotations

from typing import cast

import msgspec
import pytest

from memstream.rules.snapshot import (
    REDELIVERY_KEEP,
    Applied,
    apply_turn,
    format_snapshot,
    is_summary_turn,
    last_exchange,
    public_message,
    snapshot_modes,
    strip_private,
    truncate,
    window,
)
from memstream.schemas import Message, Provenance, SessionState
from memstream.schemas.events import Role

MARK = " …[truncated]"


# --- strip_private ---


def test_strip_private_removes_a_single_span() -> None:
    assert strip_private("use bun <private>token=abc123</private> for installs") == "use bun  for installs"


def test_strip_private_removes_every_span() -> None:
    text = "a <private>x</private> b <private>y</private> c"
    assert strip_private(text) == "a  b  c"


def test_strip_private_spans_lines() -> None:
    text = "keep this\n<private>line one\nline two\n</private>\nand this"
    assert strip_private(text) == "keep this\n\nand this"


def test_strip_private_is_case_insensitive() -> None:
    assert strip_private("a <PRIVATE>x</Private> b <PrIvAtE>y</pRiVaTe> c") == "a  b  c"


def test_an_unclosed_private_tag_hides_everything_after_it() -> None:
    assert strip_private("public part <private>secret\nmore secret") == "public part"


def test_a_fully_private_text_becomes_empty() -> None:
    assert strip_private("<private>all of it</private>") == ""
    assert strip_private("  <private>a</private>\n <private>b</private>  ") == ""
    assert strip_private("<private>never closed") == ""


def test_a_stray_closing_tag_is_dropped() -> None:
    assert strip_private("a </private> b") == "a  b"


def test_text_without_private_spans_is_only_trimmed() -> None:
    assert strip_private("  plain text  ") == "plain text"


# --- public_message ---


def test_public_message_keeps_role_and_strips_content() -> None:
    assert public_message(Message("user", "hi <private>pw</private>there")) == Message("user", "hi there")


def test_public_message_of_a_fully_private_message_is_none() -> None:
    assert public_message(Message("assistant", "<private>only secrets</private>")) is None


# --- window ---


def test_window_keeps_the_last_n_public_messages() -> None:
    history = [Message("user", f"m{i}") for i in range(8)]
    result = window(history, Message("assistant", "new"), 8)
    assert [m.content for m in result] == ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "new"]


def test_window_strips_private_spans_of_the_new_message() -> None:
    result = window([Message("user", "q")], Message("assistant", "a <private>k</private>b"), 8)
    assert result == [Message("user", "q"), Message("assistant", "a b")]


def test_window_leaves_a_fully_private_message_out() -> None:
    history = [Message("user", "one"), Message("assistant", "two")]
    result = window(history, Message("user", "<private>secret</private>"), 2)
    assert result == history


def test_window_smaller_than_history() -> None:
    history = [Message("user", "a"), Message("assistant", "b"), Message("user", "c")]
    assert window(history, Message("assistant", "d"), 2) == [Message("user", "c"), Message("assistant", "d")]


# --- format_snapshot / truncate ---


def test_format_snapshot_writes_role_and_content_per_line() -> None:
    messages = [Message("user", "How do we auth?"), Message("assistant", "JWT in httpOnly cookies.")]
    text = format_snapshot(messages, message_max_chars=1000, max_chars=10_000)
    assert text == "[user] How do we auth?\n[assistant] JWT in httpOnly cookies."


def test_format_snapshot_truncates_each_message_with_the_marker() -> None:
    long = "x" * 100
    text = format_snapshot(
        [Message("user", long), Message("assistant", "short")], message_max_chars=30, max_chars=10_000
    )
    first, second = text.split("\n")
    assert first == "[user] " + "x" * (30 - len(MARK)) + MARK
    assert len(first) == len("[user] ") + 30
    assert second == "[assistant] short"


def test_truncate_leaves_text_at_the_limit_alone() -> None:
    assert truncate("abcde", 5) == "abcde"
    assert truncate("abcdef", 5 + len(MARK)) == "abcdef"
    assert truncate("a" * 40, 20) == "a" * 7 + MARK


def test_format_snapshot_total_limit_keeps_the_newest_text() -> None:
    messages = [Message("user", "old" * 10), Message("assistant", "newest answer")]
    full = format_snapshot(messages, message_max_chars=1000, max_chars=10_000)
    text = format_snapshot(messages, message_max_chars=1000, max_chars=30)
    assert len(text) == 30
    assert text == full[-30:]
    assert text.endswith("[assistant] newest answer")


def test_format_snapshot_of_nothing_is_empty() -> None:
    assert format_snapshot([], message_max_chars=10, max_chars=10) == ""


# --- last_exchange ---


def test_last_exchange_starts_at_the_final_user_message() -> None:
    messages = [
        Message("user", "first question"),
        Message("assistant", "first answer"),
        Message("user", "second question"),
        Message("tool", "ls output"),
        Message("assistant", "second answer"),
    ]
    assert last_exchange(messages, message_max_chars=1000) == (
        "[user] second question\n[tool] ls output\n[assistant] second answer"
    )


def test_last_exchange_without_a_user_message_takes_everything() -> None:
    messages = [Message("system", "boot"), Message("assistant", "hello")]
    assert last_exchange(messages, message_max_chars=1000) == "[system] boot\n[assistant] hello"


def test_last_exchange_truncates_messages() -> None:
    messages = [Message("user", "q"), Message("assistant", "y" * 50)]
    assert last_exchange(messages, message_max_chars=20) == "[user] q\n[assistant] " + "y" * 7 + MARK


# --- summary turns and modes ---


@pytest.mark.parametrize(
    ("turn", "expected"), [(0, False), (1, False), (4, False), (5, True), (6, False), (10, True), (15, True)]
)
def test_every_fifth_assistant_turn_is_a_summary_turn(turn: int, expected: bool) -> None:
    assert is_summary_turn(turn, 5) is expected


def test_summary_every_other_n() -> None:
    assert [t for t in range(1, 10) if is_summary_turn(t, 3)] == [3, 6, 9]


def test_raw_mode_only_ever_produces_raw() -> None:
    assert snapshot_modes(1, raw=True, summary_every=5) == ["raw"]
    assert snapshot_modes(5, raw=True, summary_every=5) == ["raw"]


def test_normal_mode_adds_summary_every_nth_turn() -> None:
    assert snapshot_modes(1, raw=False, summary_every=5) == ["normal"]
    assert snapshot_modes(4, raw=False, summary_every=5) == ["normal"]
    assert snapshot_modes(5, raw=False, summary_every=5) == ["normal", "summary"]
    assert snapshot_modes(10, raw=False, summary_every=5) == ["normal", "summary"]
    assert snapshot_modes(2, raw=False, summary_every=2) == ["normal", "summary"]


# --- apply_turn: crash consistency ---


def _feed(turns: list[tuple[str, str]], state: SessionState | None = None, start: int = 0) -> list[Applied]:
    outcomes = []
    state = state or SessionState()
    for offset, (role, content) in enumerate(turns, start=start):
        outcome = apply_turn(
            state,
            partition=0,
            offset=offset,
            role=cast(Role, role),  # the tests' roles are plain strings
            content=content,
            size=8,
            message_max_chars=4000,
        )
        outcomes.append(outcome)
        state = outcome.state
    return outcomes


CONVERSATION = [(role, f"{role} {i}") for i in range(30) for role in ("user", "assistant")]


def test_a_redelivered_turn_changes_nothing_and_rebuilds_its_own_window() -> None:
    once = _feed(CONVERSATION)
    # A crash after offset 41 was applied, with offsets committed up to 35: 35.. arrive again.
    again = _feed(CONVERSATION[35:], state=once[41].state, start=35)
    for first, second in zip(once[35:], again, strict=True):
        assert (second.messages, second.assistant_turns) == (first.messages, first.assistant_turns)
    assert [o.redelivered for o in again[:7]] == [True] * 7
    assert not any(o.redelivered for o in again[7:])
    assert again[-1].state == once[-1].state


def test_a_redelivered_answer_is_never_paired_with_a_later_question() -> None:
    once = _feed(CONVERSATION[:6])  # u0 a0 u1 a1 u2 a2
    state = _feed(CONVERSATION[6:7], state=once[-1].state, start=6)[0].state  # u3 applied
    replayed = _feed(CONVERSATION[5:6], state=state, start=5)[0]  # a2 redelivered
    assert replayed.messages is not None and replayed.messages[-2:] == [
        Message("user", "user 2"),
        Message("assistant", "assistant 2"),
    ]


def test_a_turn_older_than_the_kept_history_is_skipped() -> None:
    once = _feed(CONVERSATION)
    old = _feed(CONVERSATION[1:2], state=once[-1].state, start=1)[0]
    assert old.redelivered and old.messages is None and old.state == once[-1].state


def test_the_state_is_bounded_and_messages_are_cut() -> None:
    big = [("user", "q" * 100_000), ("assistant", "a" * 100_000)] * 40
    last = _feed(big)[-1]
    assert len(last.state.applied) <= 8 + REDELIVERY_KEEP
    assert all(len(t.content) <= 4000 for t in last.state.applied)


def test_a_state_written_before_offsets_were_kept_is_carried_over() -> None:
    legacy = SessionState(messages=[Message("user", "q")], assistant_turns=2)
    outcome = _feed([("assistant", "a")], state=legacy, start=7)[0]
    assert outcome.messages == [Message("user", "q"), Message("assistant", "a")]
    assert outcome.assistant_turns == 3


@pytest.mark.parametrize("answer", ["", "   ", "<private>all of it</private>"])
def test_an_answer_with_nothing_public_makes_no_snapshot(answer: str) -> None:
    outcomes = _feed([("user", "what port?"), ("assistant", answer)])
    assert outcomes[-1].messages is None
    assert outcomes[-1].assistant_turns == 1


def test_provenance_rides_with_each_applied_turn_and_its_redelivery() -> None:
    where = [Provenance(source_type="claude", file="s.jsonl", line=n) for n in (1, 2)]
    state = SessionState()
    outcomes = []
    for offset, (role, content) in enumerate([("user", "q"), ("assistant", "a")]):
        outcome = apply_turn(
            state,
            partition=0,
            offset=offset,
            role=role,  # type: ignore[arg-type]
            content=content,
            size=8,
            message_max_chars=4000,
            provenance=where[offset],
        )
        outcomes.append(outcome)
        state = outcome.state
    assert outcomes[-1].messages == [Message("user", "q", where[0]), Message("assistant", "a", where[1])]
    again = apply_turn(state, partition=0, offset=1, role="assistant", content="a", size=8, message_max_chars=4000)
    assert again.redelivered and again.messages == outcomes[-1].messages


def test_a_state_kept_under_the_bare_session_id_is_adopted_only_by_its_own_tenant() -> None:
    from memstream.identity import turn_session_key
    from memstream.rules.snapshot import legacy_state_of

    legacy = SessionState(assistant_turns=3, project="/repos/a", user="alice@example.com")
    assert legacy_state_of(legacy, "/repos/a", "alice@example.com")
    assert not legacy_state_of(legacy, "/repos/a", "bob@example.com")
    assert not legacy_state_of(legacy, "/repos/b", "alice@example.com")
    # A state written under a session key names its session: never mistaken for a legacy one.
    keyed = msgspec.structs.replace(legacy, session_id="s-42")
    assert not legacy_state_of(keyed, "/repos/a", "alice@example.com")
    a = turn_session_key("s-42", "/repos/a", "alice@example.com")
    assert a != turn_session_key("s-42", "/repos/a", "bob@example.com")
    assert a != turn_session_key("s-42", "/repos/b", "alice@example.com")
    assert a == turn_session_key("s-42", "/repos/a/", "Alice@Example.com")  # the scopes' own normalisation


def test_a_copied_turn_is_known_by_its_origin_only() -> None:
    """A turn the stage re-published under its session key is identified by the record it copies
    (``exact``): a second copy of one origin is a redelivery, whatever offsets came between, and a
    copy of an origin the session never applied is applied, even below the last offset applied."""

    def copy(state: SessionState, partition: int, offset: int, role: Role, content: str) -> Applied:
        return apply_turn(
            state,
            partition=partition,
            offset=offset,
            role=role,
            content=content,
            size=8,
            message_max_chars=4000,
            exact=True,
        )

    state = copy(copy(SessionState(), 1, 40, "user", "q").state, 1, 41, "assistant", "a").state
    again = copy(state, 1, 41, "assistant", "a")
    assert again.redelivered and again.assistant_turns == 1
    # The next turn copies a record below the last one applied (the session has two publishers).
    other = copy(state, 1, 7, "user", "q2")
    assert not other.redelivered and other.state.applied[-1].content == "q2"


def test_a_turn_passed_over_and_read_again_after_later_turns_is_applied() -> None:
    """A rebalance skips the events Faust fetched before it, and the same worker may apply later
    turns of the session before the partition is read again from its committed offset. The
    skipped turns then arrive below the last offset applied: they were taken for redeliveries,
    acked without a snapshot and committed past (bench.faults.chaos: 84 of 1,000 exchanges lost so)."""

    def read(state: SessionState, offset: int, role: Role, content: str) -> Applied:
        return apply_turn(state, partition=1, offset=offset, role=role, content=content, size=8, message_max_chars=4000)

    state = read(read(SessionState(), 10, "user", "q1").state, 11, "assistant", "a1").state
    # q2 (20) and a2 (21) were skipped; q3 (30) and a3 (31) applied; then 20 and 21 come again.
    state = read(read(state, 30, "user", "q3").state, 31, "assistant", "a3").state
    late_q = read(state, 20, "user", "q2")
    assert not late_q.redelivered
    late_a = read(late_q.state, 21, "assistant", "a2")
    assert not late_a.redelivered and late_a.exchange is not None
    assert [m.content for m in late_a.exchange] == ["q2", "a2"]
    # Each is a redelivery once applied.
    assert read(late_a.state, 21, "assistant", "a2").redelivered


def test_a_sessions_first_exchange_passed_over_and_read_again_is_applied() -> None:
    """The first exchange of a session passed over in a rebalance comes again below every turn the
    session keeps: it is not a forgotten redelivery, since nothing was applied before the session's
    first turn (bench.faults.chaos lost such first exchanges to the 'too old to tell' rule)."""

    def read(state: SessionState, offset: int, role: Role, content: str) -> Applied:
        return apply_turn(state, partition=0, offset=offset, role=role, content=content, size=8, message_max_chars=4000)

    state = read(read(SessionState(), 30, "user", "q1").state, 31, "assistant", "a1").state
    assert state.first_applied == [0, 30]
    late = read(read(state, 20, "user", "q0").state, 21, "assistant", "a0")
    assert not late.redelivered and late.exchange is not None
    assert [m.content for m in late.exchange] == ["q0", "a0"]
    assert late.state.first_applied == [0, 20]
    assert read(late.state, 21, "assistant", "a0").redelivered
    # A state from before first_applied was kept: below every kept turn is a redelivery, as before.
    legacy = msgspec.structs.replace(state, first_applied=[])
    assert read(legacy, 20, "user", "q0").redelivered

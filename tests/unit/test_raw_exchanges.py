"""Issue 25.3: raw mode stores one exchange once. Every snapshot of an exchange names the exchange
(its base: the session's assistant-turn count when its question arrived), however many messages
the reply takes, so the decide stage refreshes the exchange's one memory instead of adding another."""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.rules.coalesce import newest_of_each_exchange
from memstream.rules.snapshot import Applied, apply_turn, current_exchange, exchange_id
from memstream.schemas import AppliedTurn, Fact, SessionState
from memstream.schemas.events import Role

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def run(
    turns: list[tuple[Role, str]], state: SessionState | None = None, first_offset: int = 0
) -> tuple[SessionState, list[Applied]]:
    state = state or SessionState()
    outcomes = []
    for offset, (role, content) in enumerate(turns, start=first_offset):
        outcome = apply_turn(
            state, partition=0, offset=offset, role=role, content=content, size=8, message_max_chars=4000
        )
        state = outcome.state
        outcomes.append(outcome)
    return state, outcomes


def contents(outcome: Applied) -> list[str]:
    assert outcome.exchange is not None
    return [m.content for m in outcome.exchange]


def test_each_reply_message_names_the_exchange_its_question_began() -> None:
    _, out = run([("user", "Q1"), ("assistant", "A1"), ("assistant", "A2"), ("user", "Q2"), ("assistant", "A3")])
    assert (contents(out[1]), out[1].exchange_base) == (["Q1", "A1"], 0)
    assert (contents(out[2]), out[2].exchange_base) == (["Q1", "A1", "A2"], 0)
    assert (contents(out[4]), out[4].exchange_base) == (["Q2", "A3"], 2)
    assert exchange_id("s", 0) == exchange_id("s", 0) != exchange_id("s", 2) != exchange_id("t", 2)


def test_questions_sent_back_to_back_open_one_exchange() -> None:
    _, out = run([("user", "Q1"), ("user", "Q1 again"), ("assistant", "A")])
    assert (contents(out[2]), out[2].exchange_base) == (["Q1", "Q1 again", "A"], 0)


def test_a_question_waiting_for_its_answer_is_the_exchange_the_answer_joins() -> None:
    state, _out = run([("user", "Q1"), ("assistant", "A1"), ("user", "Q2")])
    pending, base = current_exchange(state)
    assert pending is not None and [m.content for m in pending] == ["Q2"] and base == 1
    state, more = run([("assistant", "A2")], state, first_offset=3)
    assert more[0].exchange_base == base


def test_a_reply_longer_than_the_window_keeps_its_question() -> None:
    replies: list[tuple[Role, str]] = [("assistant", f"A{i}") for i in range(12)]
    _, out = run([("user", "Q"), *replies])
    last = out[-1]
    assert last.messages is not None and next(m.content for m in last.messages) != "Q"  # the window lost it
    assert contents(last)[0] == "Q" and len(contents(last)) == 13


def test_a_redelivered_reply_names_the_same_exchange() -> None:
    state, _out = run([("user", "Q"), ("assistant", "A1"), ("assistant", "A2")])
    again = apply_turn(state, partition=0, offset=1, role="assistant", content="A1", size=8, message_max_chars=4000)
    assert again.redelivered and contents(again) == ["Q", "A1"] and again.exchange_base == 0


def test_turns_kept_before_the_base_existed_name_no_exchange() -> None:
    legacy = SessionState(
        assistant_turns=1,
        applied=[
            AppliedTurn(partition=0, offset=0, role="user", content="Q", assistant_turns=0),
            AppliedTurn(partition=0, offset=1, role="assistant", content="A", assistant_turns=1),
        ],
    )
    again = apply_turn(legacy, partition=0, offset=1, role="assistant", content="A", size=8, message_max_chars=4000)
    assert again.exchange is None and again.exchange_base == -1
    # A new question starts an exchange the state knows from then on.
    _, out = run([("user", "Q2"), ("assistant", "A2")], legacy, first_offset=2)
    assert contents(out[1]) == ["Q2", "A2"] and out[1].exchange_base == 1


def test_only_a_raw_exchange_takes_the_exchange_id() -> None:
    from datetime import UTC, datetime

    from memstream.agents.extract import _fact
    from memstream.rules.extraction import ExtractedFact
    from memstream.schemas import Snapshot

    snapshot = Snapshot(
        snapshot_id="s1-2",
        session_id="s1",
        project="/p",
        project_key="p_x",
        user_key="",
        mode="normal",
        text="[user] Q\n[assistant] A",
        turn_index=2,
        exchange="[user] Q\n[assistant] A",
        exchange_id=exchange_id("s1", 1),
        ts=datetime(2026, 11, 1, tzinfo=UTC),
    )
    said = ExtractedFact("[user] Q\n[assistant] A", "conversation", "project", 1.0)
    fact = ExtractedFact("The export scans the orders table", "architecture", "project", 0.9)
    assert _fact(snapshot, said, ("project", "p_x"), 0, [], raw=True).exchange_id == snapshot.exchange_id
    # A model's "conversation" fact, or any other fact of the exchange, keeps its content's id.
    assert _fact(snapshot, said, ("project", "p_x"), 0, []).exchange_id == ""
    assert _fact(snapshot, fact, ("project", "p_x"), 1, [], raw=True).exchange_id == ""


def test_a_long_exchange_keeps_its_question_and_final_answer_whole() -> None:
    # Issue 37.2, the shape of a real Codex exchange: a question, eleven progress notes, a final report.
    # Every message was cut to its ends and then the end of the whole was cut: the memory stopped in a
    # progress note, and the report (what was done) was lost.
    from memstream.rules.extraction import CONVERSATION_MAX_CHARS, raw_facts

    question = "let's update the default context compaction to 90 in the env var " + "and keep the docs right. " * 8
    notes = [
        f"[assistant] Progress {i}: looking at file{i}.ts, " + "reading the callers and the tests. " * 8
        for i in range(11)
    ]
    report = "Implemented the change. Changed: codemie-code.plugin.ts:99, docs/config.md:12." + " Tests pass." * 30
    exchange = "\n".join([f"[user] {question}", *notes, f"[assistant] {report}"])
    [fact, *_] = raw_facts(exchange)
    assert len(fact.text) <= CONVERSATION_MAX_CHARS
    assert fact.text.startswith(f"[user] {question}\n")
    assert fact.text.endswith(f"[assistant] {report}")


def test_a_final_answer_over_the_limit_alone_gives_up_its_middle_and_the_question_stays_whole() -> None:
    from memstream.rules.extraction import CONVERSATION_MAX_CHARS, raw_facts

    report = "Summary first. " + "A long middle part. " * 200 + "Changed: api.py:10."
    exchange = "\n".join(["[user] what did you change?", "[assistant] Working on it.", f"[assistant] {report}"])
    [fact] = raw_facts(exchange)
    assert len(fact.text) <= CONVERSATION_MAX_CHARS
    assert fact.text.startswith("[user] what did you change?\n")
    assert "Summary first." in fact.text and fact.text.endswith("Changed: api.py:10.")


def test_a_message_over_the_message_limit_keeps_its_end() -> None:
    # The session state keeps each message within MEMSTREAM_MESSAGE_MAX_CHARS: cut in its middle, so the
    # conclusion of a long final report survives to the memory.
    report = "Summary. " + "detail " * 1000 + "Changed: api.py:10."
    _, out = run([("user", "what changed?"), ("assistant", report)])
    kept = contents(out[1])[1]
    assert len(kept) <= 4000 and kept.startswith("Summary.") and kept.endswith("Changed: api.py:10.")


def test_a_reply_longer_than_the_state_keeps_keeps_its_question() -> None:
    # Issue 37: an agent that works long writes many messages before its final answer. The state keeps
    # the last REDELIVERY_KEEP turns and a window before them: past that, the question fell out, the
    # exchange's memory became its replies alone (an orphan reply) and the question was nowhere.
    replies: list[tuple[Role, str]] = [("assistant", f"A{i}") for i in range(40)]
    state, out = run([("user", "Q"), ("user", "and Q2"), *replies])
    assert contents(out[-1])[:2] == ["Q", "and Q2"] and contents(out[-1])[-1] == "A39"
    assert out[-1].exchange_base == 0
    # A turn redelivered from before what the state keeps is still a redelivery, not a new message.
    again = apply_turn(state, partition=0, offset=5, role="assistant", content="A3", size=8, message_max_chars=4000)
    assert again.redelivered
    # The next exchange starts afresh: the pinned question goes once its exchange is over.
    state, more = run([("user", "Q3"), *[("assistant", f"B{i}") for i in range(30)]], state, first_offset=42)
    assert contents(more[-1])[0] == "Q3" and "Q" not in [t.content for t in state.applied]


def _fact(n: int, text: str, exchange: str = "", scope: str = "p_shop") -> Fact:
    return Fact(
        fact_id=f"f{n}", text=text, type="conversation", scope="project", scope_key=scope, exchange_id=exchange, ts=T0
    )


def test_of_an_exchanges_facts_waiting_together_only_the_newest_is_embedded() -> None:
    """Issue 37: each message of a long exchange made a fact of the whole exchange so far, and each was
    embedded and stored (72 embeddings for one exchange of the spotter session); the newest holds them all."""
    batch = [
        _fact(1, "[user] Q\n[assistant] note 1", "x"),
        _fact(2, "a preference, not an exchange"),
        _fact(3, "[user] Q\n[assistant] note 1\n[assistant] note 2", "x"),
        _fact(4, "[user] R\n[assistant] other exchange", "y"),
        _fact(5, "[user] Q\n[assistant] note 1\n[assistant] note 2\n[assistant] Done: the answer", "x"),
        _fact(6, "[user] Q\n[assistant] the same exchange id in another scope", "x", scope="p_other"),
    ]
    kept = newest_of_each_exchange(batch)
    assert [f.fact_id for f, k in zip(batch, kept, strict=True) if k] == ["f2", "f4", "f5", "f6"]
    assert kept[4] and "Done: the answer" in batch[4].text  # the final reply survives


def test_facts_that_are_no_exchanges_are_all_embedded_even_when_equal() -> None:
    batch = [_fact(1, "same"), _fact(2, "same"), _fact(3, "only one of its exchange", "z")]
    assert newest_of_each_exchange(batch) == [True, True, True]

"""No identity leaks between people: a turn's personal preference never lands where others read it,
and a server never lends its own identity to a turn or a read."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from memstream.agents.extract import explicit_facts, fact_scope
from memstream.identity import project_key, user_key
from memstream.rules.extraction import ExtractedFact, parse_facts, raw_facts
from memstream.schemas import Snapshot

NOW = datetime(2026, 11, 23, tzinfo=UTC)
P = project_key("/repos/a")
ALICE = user_key("alice@example.com")


def snapshot(user: str = ALICE, exchange: str = "", mode: str = "raw") -> Snapshot:
    return Snapshot(
        snapshot_id="s1",
        session_id="sess",
        project="/repos/a",
        project_key=P,
        user_key=user,
        mode=mode,  # type: ignore[arg-type]
        text=exchange,
        turn_index=1,
        exchange=exchange,
        ts=NOW,
    )


def test_a_raw_exchange_stays_in_its_project_and_a_standing_preference_goes_to_its_user() -> None:
    """Issue 25.4: the conversation belongs to the project; the stated preference, to its speaker."""
    facts = raw_facts("[user] I prefer tabs over spaces, always\n[assistant] Noted, tabs it is.")
    assert [(f.type, f.scope) for f in facts] == [("conversation", "project"), ("preference", "user")]
    assert facts[1].text == "I prefer tabs over spaces, always"
    [neutral] = raw_facts("[user] the build uses make\n[assistant] ok")
    assert (neutral.type, neutral.scope) == ("conversation", "project")


def test_only_the_user_lines_state_a_preference() -> None:
    # The assistant saying "I prefer" is not the user stating a preference.
    facts = raw_facts("[user] what should we use?\n[assistant] I prefer pytest here")
    assert [(f.type, f.scope) for f in facts] == [("conversation", "project")]


def test_a_personal_fact_goes_to_its_user_scope() -> None:
    fact = ExtractedFact("Prefers bun over npm", "preference", "user", 1.0)
    assert fact_scope(snapshot(ALICE), fact) == ("user", ALICE)


def test_a_personal_fact_without_a_user_is_dropped_not_moved_to_the_project() -> None:
    fact = ExtractedFact("Prefers bun over npm", "preference", "user", 1.0)
    assert fact_scope(snapshot(""), fact) is None


def test_project_facts_stay_in_the_project_with_or_without_a_user() -> None:
    fact = ExtractedFact("The API uses JWT", "architecture", "project", 1.0)
    assert fact_scope(snapshot(""), fact) == ("project", P)
    assert fact_scope(snapshot(ALICE), fact) == ("project", P)


def test_an_anonymous_exchange_stating_a_preference_is_still_stored_in_its_project() -> None:
    """Issue 25.4: no exchange is dropped for want of a user; only the preference, which nobody owns."""
    exchange = "[user] remember that I prefer dark mode\n[assistant] Noted."
    anonymous = msgspec.structs.replace(snapshot("", exchange), explicit=["I prefer dark mode"])
    facts = [*explicit_facts(anonymous), *raw_facts(anonymous.exchange)]
    assert [fact_scope(anonymous, f) for f in facts if f.type == "conversation"] == [("project", P)]
    assert [fact_scope(anonymous, f) for f in facts if f.type == "preference"] == [None, None]
    owned = msgspec.structs.replace(anonymous, user_key=ALICE)
    assert {fact_scope(owned, f) for f in facts if f.type == "preference"} == {("user", ALICE)}


def test_a_preference_the_model_puts_in_the_project_goes_to_its_speaker() -> None:
    """Issue 27.5: a preference is its speaker's, whatever scope the model's reply names."""
    [fact] = parse_facts(
        '[{"memory": "Prefers bun over npm for installs", "type": "preference", "scope": "project"}]'
    ).facts
    assert fact.scope == "user"
    assert fact_scope(snapshot(ALICE, mode="normal"), fact) == ("user", ALICE)

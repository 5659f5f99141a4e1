"""No identity leaks between people: a turn's personal preference never lands where others read it,
and a server never lends its own identity to a turn or a read."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from memstream.agents.extract import explicit_facts, fact_scope
from memstream.identity import project_key, user_key
from memstream.rules.extraction import ExtractedFact, raw_fact
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


def test_raw_mode_keeps_an_exchange_stating_a_preference_out_of_the_project_scope() -> None:
    fact = raw_fact("[user] I prefer tabs over spaces, always\n[assistant] Noted, tabs it is.")
    assert fact is not None and fact.scope == "user"
    neutral = raw_fact("[user] the build uses make\n[assistant] ok")
    assert neutral is not None and neutral.scope == "project"


def test_only_the_user_lines_decide_a_raw_exchange_scope() -> None:
    # The assistant saying "I prefer" is not the user stating a preference.
    fact = raw_fact("[user] what should we use?\n[assistant] I prefer pytest here")
    assert fact is not None and fact.scope == "project"


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


def test_a_raw_preference_exchange_of_an_anonymous_turn_stores_nothing() -> None:
    exchange = "[user] remember that I prefer dark mode\n[assistant] Noted."
    anonymous = msgspec.structs.replace(snapshot("", exchange), explicit=["I prefer dark mode"])
    raw = raw_fact(anonymous.exchange)
    assert raw is not None
    facts = [*explicit_facts(anonymous), raw]
    assert len(facts) == 2 and [fact_scope(anonymous, f) for f in facts] == [None, None]
    owned = msgspec.structs.replace(anonymous, user_key=ALICE)
    assert {fact_scope(owned, f) for f in facts} == {("user", ALICE)}

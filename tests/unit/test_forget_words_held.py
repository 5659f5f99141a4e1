"""A forget's audit names the topics still holding the scope's words, and until when (issue 41.3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec

from memstream.intake.forget import forget_event
from memstream.schemas import ForgetScope
from memstream.topics.catalog import (
    ALL_TOPICS,
    DERIVED_RETENTION_MS,
    FORGOTTEN,
    REDRIVEN,
    TURNS,
    WORD_HOLDING_TOPICS,
    topic_config,
)

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def test_the_forget_event_records_each_word_holding_topic_and_until_when() -> None:
    event = forget_event(user="alice", requested_by="admin", at=NOW)
    held = event.words_held_until
    assert held["turns"] is None, "turns are kept forever: the audit must say so"
    for name in ("snapshots", "parked", "facts", "embedded", "memory-ops"):
        assert held[name] == NOW + timedelta(milliseconds=DERIVED_RETENTION_MS)
    assert held["memory-updated"] == NOW + timedelta(days=30)
    assert held["history"] == NOW + timedelta(days=180)
    assert held["documents"] == NOW + timedelta(days=7)


def test_every_delete_policy_topic_but_the_ledgers_is_named() -> None:
    named = {spec.name for spec in WORD_HOLDING_TOPICS}
    deleting = {s.name for s in ALL_TOPICS if s.config.get("cleanup.policy") == "delete"}
    assert named == deleting - {FORGOTTEN.name, REDRIVEN.name}


def test_the_audit_survives_the_ledger_and_old_records_still_decode() -> None:
    event = forget_event(project="/shop", at=NOW)
    again = msgspec.json.decode(msgspec.json.encode(event), type=ForgetScope)
    assert again.words_held_until == event.words_held_until
    old = msgspec.json.encode(msgspec.structs.replace(event, words_held_until={}))
    assert msgspec.json.decode(old, type=ForgetScope).words_held_until == {}


def test_the_words_retention_setting_caps_every_word_holding_topic() -> None:
    day_ms = 86_400_000
    for spec in ALL_TOPICS:
        config = topic_config(spec, day_ms // 2)
        if spec in WORD_HOLDING_TOPICS:
            assert config["retention.ms"] == str(day_ms // 2), spec.name
        else:
            assert config == spec.config, spec.name
    held = forget_event(user="alice", at=NOW, words_retention_ms=day_ms // 2).words_held_until
    assert set(held.values()) == {NOW + timedelta(hours=12)}, "turns too: nothing is kept forever"
    assert topic_config(TURNS) == TURNS.config, "0: as declared"

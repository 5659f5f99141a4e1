"""The capture spec's universal message format on the turn: turn.v2, old turn.v1 bytes, provenance into snapshots."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import msgspec

from memstream.commands.read import format_record
from memstream.intake.publish import make_turn
from memstream.rules.snapshot import exchange_sources, window
from memstream.schemas import (
    HistoryRecord,
    Message,
    Provenance,
    SessionState,
    Turn,
    TurnMetadata,
    TurnTimestamps,
    decode,
    encode,
    normalized_turn_content,
    turn_hash,
    turn_metadata,
)

TS = datetime(2026, 2, 3, 12, 0, tzinfo=UTC)
LINE_42 = Provenance(source_type="claude", session_id="s1", file="/home/u/.claude/projects/x/s1.jsonl", line=42)

V1 = (
    b'{"schema":"turn.v1","session_id":"s-old","project":"/repo","role":"assistant",'
    b'"content":"done\\r\\n","ts":"2024-06-01T12:00:00Z","source":"claude-code"}'
)


def test_turn_v1_bytes_decode_into_the_pipeline_turn_with_universal_fields() -> None:
    turn = decode(V1)
    assert type(turn) is Turn
    assert (turn.session_id, turn.content, turn.source) == ("s-old", "done\r\n", "claude-code")
    assert turn.hash == hashlib.sha256(b"done").hexdigest()
    assert turn.provenance == Provenance(source_type="claude-code", session_id="s-old")
    assert turn.timestamps == TurnTimestamps(occurred=turn.ts, extracted_at=turn.ts)
    assert turn.metadata == TurnMetadata(content_length=4, has_code=False, has_markdown=False)


def test_an_upgraded_v1_turn_is_written_back_as_v2() -> None:
    assert json.loads(encode(decode(V1)))["schema"] == "turn.v2"
    assert decode(encode(decode(V1))) == decode(V1)


def test_a_v2_turn_carries_the_cusf_fields_on_the_wire() -> None:
    turn = make_turn(
        session_id="s1",
        project="/repo",
        role="assistant",
        content="Run `make test`\r\n",
        ts=TS,
        source="claude",
        llm_source="claude",
        llm_model="claude-opus-4-5",
        provenance=LINE_42,
    )
    wire = json.loads(encode(turn))
    assert wire["schema"] == "turn.v2"
    assert wire["hash"] == hashlib.sha256(b"Run `make test`").hexdigest()
    assert (wire["llm_source"], wire["llm_model"]) == ("claude", "claude-opus-4-5")
    assert wire["provenance"] == {"source_type": "claude", "session_id": "s1", "file": LINE_42.file, "line": 42}
    assert wire["timestamps"]["occurred"] == "2026-02-03T12:00:00Z"
    assert wire["metadata"] == {"content_length": 15, "has_code": True, "has_markdown": True}
    assert decode(encode(turn)) == turn


def test_the_hash_ignores_surrounding_space_and_line_ending_style() -> None:
    assert normalized_turn_content("  a\r\nb\rc \n") == "a\nb\nc"
    assert turn_hash("a\r\nb") == turn_hash("a\nb\n") != turn_hash("a b")


def test_metadata_tells_code_and_markdown_apart() -> None:
    assert turn_metadata("```py\nprint(1)\n```") == TurnMetadata(content_length=18, has_code=True, has_markdown=True)
    assert turn_metadata("## Plan\n- one\n- two").has_markdown
    assert not turn_metadata("## Plan\n- one").has_code
    assert turn_metadata("plain words, nothing else") == TurnMetadata(
        content_length=25, has_code=False, has_markdown=False
    )


def test_messages_keep_their_provenance_through_the_window_and_state() -> None:
    messages = window([], Message("user", "q <private>k</private>", LINE_42), 8)
    assert messages == [Message("user", "q", LINE_42)]
    state = SessionState(messages=messages, assistant_turns=1)
    assert decode(encode(state)) == state
    # State written before messages had provenance still decodes.
    old = b'{"schema":"state.session.v1","messages":[{"role":"user","content":"q"}],"assistant_turns":0}'
    assert decode(old) == SessionState(messages=[Message("user", "q")], assistant_turns=0)


def test_the_exchange_names_each_source_once_oldest_first() -> None:
    line_43 = msgspec.structs.replace(LINE_42, line=43)
    messages = [
        Message("user", "earlier", msgspec.structs.replace(LINE_42, line=1)),
        Message("user", "q", LINE_42),
        Message("assistant", "a", line_43),
        Message("assistant", "b", line_43),
        Message("assistant", "published directly"),
    ]
    assert exchange_sources(messages) == [LINE_42, line_43]


def test_history_says_file_and_line() -> None:
    record = HistoryRecord(record_id="r", memory_id="m", scope_key="p", outcome="created", sources=[LINE_42], ts=TS)
    assert format_record(msgspec.to_builtins(record)).endswith(f"from {LINE_42.file}:42")


def test_a_turn_from_before_the_session_end_flag_decodes_as_not_ending_and_the_flag_round_trips() -> None:
    wire = json.loads(encode(make_turn(session_id="s", project="/repo", role="user", content="hi", ts=TS)))
    del wire["ends_session"]  # turn.v2 bytes written before the field existed
    turn = decode(json.dumps(wire).encode())
    assert isinstance(turn, Turn) and turn.ends_session is False
    ended = make_turn(session_id="s", project="/repo", role="user", content="bye", ts=TS, ends_session=True)
    again = decode(encode(ended))
    assert isinstance(again, Turn) and again.ends_session is True

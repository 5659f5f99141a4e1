"""Turn validation before anything is published: make_turn and parse_jsonl."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from memstream.intake.publish import TurnError, make_turn, parse_jsonl, read_jsonl
from memstream.schemas import ROLES, Provenance, Turn, turn_hash

TS = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def line(**fields: object) -> str:
    values: dict[str, object] = {"session_id": "s1", "project": "/repo", "role": "user", "content": "hello"}
    values.update(fields)
    return json.dumps(values)


def bare(turn: Turn) -> Turn:
    """The turn without the capture spec's universal fields (hash, provenance, timestamps, metadata)."""
    return msgspec.structs.replace(turn, hash="", provenance=None, timestamps=None, metadata=None)


# --- make_turn ---


def test_make_turn_builds_a_turn() -> None:
    turn = make_turn(
        session_id="s1", project="/repo", role="assistant", content="done", ts=TS, user="u@x", source="codex"
    )
    assert bare(turn) == Turn(
        session_id="s1", project="/repo", role="assistant", content="done", ts=TS, user="u@x", source="codex"
    )
    assert turn.hash == turn_hash("done")
    assert turn.provenance == Provenance(source_type="codex", session_id="s1")


def test_make_turn_stamps_now_when_no_time_is_given() -> None:
    before = datetime.now(UTC)
    turn = make_turn(session_id="s1", project="/repo", role="user", content="hi")
    assert before <= turn.ts <= datetime.now(UTC)
    assert turn.ts.tzinfo is not None
    assert (turn.user, turn.source) == ("", "")


def test_unknown_role_names_the_role_and_the_valid_ones() -> None:
    with pytest.raises(TurnError) as info:
        make_turn(session_id="s1", project="/repo", role="robot", content="beep")
    message = str(info.value)
    assert "'robot'" in message
    assert ROLES == ("user", "assistant", "system", "tool")
    assert "user, assistant, system, tool" in message


def test_roles_are_case_sensitive() -> None:
    with pytest.raises(TurnError, match="'User'"):
        make_turn(session_id="s1", project="/repo", role="User", content="hi")


@pytest.mark.parametrize("role", ROLES)
def test_every_role_is_accepted(role: str) -> None:
    assert make_turn(session_id="s", project="/p", role=role, content="c").role == role


@pytest.mark.parametrize("content", ["", "   ", "\n\t"])
def test_empty_content_is_rejected(content: str) -> None:
    with pytest.raises(TurnError, match="content is empty"):
        make_turn(session_id="s1", project="/repo", role="user", content=content)


@pytest.mark.parametrize("session_id", ["", "  "])
def test_empty_session_is_rejected(session_id: str) -> None:
    with pytest.raises(TurnError, match="session id is empty"):
        make_turn(session_id=session_id, project="/repo", role="user", content="hi")


def test_empty_project_is_rejected() -> None:
    with pytest.raises(TurnError, match="project is empty"):
        make_turn(session_id="s1", project=" ", role="user", content="hi")


def test_turn_error_is_a_value_error() -> None:
    assert issubclass(TurnError, ValueError)


# --- parse_jsonl ---


def test_good_file_gives_turns_with_defaults() -> None:
    turns = parse_jsonl(
        [
            line(ts="2025-01-02T03:04:05Z"),
            line(role="assistant", content="hi there", ts="2025-01-02T03:04:06Z", user="dev@x", source="claude-code"),
        ]
    )
    assert [bare(t) for t in turns] == [
        Turn(session_id="s1", project="/repo", role="user", content="hello", ts=TS),
        Turn(
            session_id="s1",
            project="/repo",
            role="assistant",
            content="hi there",
            ts=datetime(2025, 1, 2, 3, 4, 6, tzinfo=UTC),
            user="dev@x",
            source="claude-code",
        ),
    ]


def test_a_line_without_ts_is_stamped_now() -> None:
    before = datetime.now(UTC)
    (turn,) = parse_jsonl([line()])
    assert before <= turn.ts <= datetime.now(UTC)
    assert (turn.user, turn.source) == ("", "")


def test_unknown_fields_in_a_line_are_ignored() -> None:
    (turn,) = parse_jsonl([line(ts="2025-01-02T03:04:05Z", extra={"x": 1})])
    assert bare(turn) == Turn(session_id="s1", project="/repo", role="user", content="hello", ts=TS)


def test_blank_lines_are_skipped_but_counted() -> None:
    turns = parse_jsonl(["", line(content="a"), "   ", "\n", line(content="b")])
    assert [t.content for t in turns] == ["a", "b"]
    with pytest.raises(TurnError, match=r"^input line 4: "):
        parse_jsonl(["", line(), "  ", "{broken"])


def test_malformed_json_names_the_line() -> None:
    with pytest.raises(TurnError, match=r"^input line 2: ") as info:
        parse_jsonl([line(), '{"session_id": "s1", "project": ', line()])
    assert "line 2" in str(info.value)


def test_unknown_role_on_line_three_names_line_three_and_the_role() -> None:
    with pytest.raises(TurnError) as info:
        parse_jsonl([line(), line(role="assistant"), line(role="narrator"), line()])
    message = str(info.value)
    assert message.startswith("input line 3: ")
    assert "'narrator'" in message


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        (line(session_id=""), "session id is empty"),
        (line(content=" "), "content is empty"),
        (json.dumps({"session_id": "s1", "project": "/repo", "role": "user"}), "content"),
        (line(session_id=5), "session_id"),
        (line(ts="yesterday"), "ts"),
        ("[1, 2]", ""),
        ("null", ""),
    ],
)
def test_invalid_lines_name_the_line(bad: str, needle: str) -> None:
    with pytest.raises(TurnError, match=r"^input line 2: ") as info:
        parse_jsonl([line(), bad])
    assert needle in str(info.value)


def test_the_name_prefixes_errors() -> None:
    with pytest.raises(TurnError, match=r"^turns\.jsonl line 1: "):
        parse_jsonl(["nope"], name="turns.jsonl")


@pytest.mark.parametrize("lines", [[], [""], ["   ", "\n"]])
def test_empty_input_is_an_error(lines: list[str]) -> None:
    with pytest.raises(TurnError, match=r"^input: no turns found$"):
        parse_jsonl(lines)


def test_read_jsonl_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_text(line(ts="2025-01-02T03:04:05Z") + "\n\n" + line(role="robot") + "\n")
    with pytest.raises(TurnError, match=rf"^{path} line 3: "):
        read_jsonl(path)


def test_read_jsonl_of_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TurnError, match="cannot read"):
        read_jsonl(tmp_path / "absent.jsonl")

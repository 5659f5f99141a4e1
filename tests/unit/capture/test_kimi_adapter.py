"""Kimi CLI wire logs to turns, on fixtures written from kimi-cli's wire types and their serialised shapes."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from memstream.capture.adapters import kimi, parse
from memstream.capture.detect import detect
from memstream.capture.model import Parsed, Source
from memstream.capture.reader import read_session

FIXTURES = Path(__file__).parents[2] / "fixtures" / "capture" / "kimi"
WORK_DIR = "/home/ada/src/orbit"
FOLDER = FIXTURES / "sessions" / "aba723d5ea38e0b657ee4c05d39f2579"
WIRE = FOLDER / "6f2b1c9e-4d3a-4e5f-9a8b-7c6d5e4f3a2b" / "wire.jsonl"
FORK = FOLDER / "0b9a8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d" / "wire.jsonl"
MTIME = datetime(2026, 1, 1, tzinfo=UTC)
T = 1763600000.0


def read(path: Path, *, final: bool = False) -> Parsed:
    found = read_session(path, final=final)
    parsed = parse(Source.KIMI, str(path), found.records, mtime=MTIME, projects=kimi.load_projects(FIXTURES))
    parsed.problems[:0] = found.problems
    return parsed


def rows(parsed: Parsed) -> list[tuple[str, str, int]]:
    return [(turn.role, turn.content, turn.line) for turn in parsed.turns]


def test_stream_fragments_of_a_step_become_one_turn_and_only_the_conversation_is_kept() -> None:
    parsed = read(WIRE)
    assert rows(parsed) == [
        ("user", "Why does the retry loop never stop?", 2),
        ("assistant", "Let me read `retry.py` first.", 5),
        ("assistant", "`attempts` is reset inside the loop;", 12),
        ("user", "and keep the delay linear", 14),
        ("assistant", "Move it above the `while` and keep a linear delay.", 16),
        ("user", "Rename it to max_attempts", 20),
        ("assistant", "Renam", 22),  # what was on screen when the person interrupted
        # the /btw side question (26-27) is answered beside the conversation, not in it
    ]
    assert {turn.session_id for turn in parsed.turns} == {"6f2b1c9e-4d3a-4e5f-9a8b-7c6d5e4f3a2b"}
    assert {turn.project for turn in parsed.turns} == {WORK_DIR}
    assert {turn.model for turn in parsed.turns} == {""}  # the wire does not record it
    assert parsed.turns[1].ts == datetime.fromtimestamp(T + 1.0, tz=UTC)
    assert parsed.turns[1].message_id == f"assistant@{T + 1.0}"
    assert parsed.problems == []


def test_half_written_last_line_is_reported_only_once_the_file_is_final() -> None:
    final = read(WIRE, final=True)
    assert [(problem.line, problem.reason) for problem in final.problems] == [(30, "half-written last line")]
    assert rows(final) == rows(read(WIRE))


def test_a_fork_repeats_the_parent_turns_with_the_same_message_ids() -> None:
    parent = {(turn.message_id, turn.content) for turn in read(WIRE).turns}
    fork = read(FORK).turns
    assert [turn.content for turn in fork][-2:] == [
        "Try exponential backoff instead",
        "Switched to exponential backoff.",
    ]
    assert {(turn.message_id, turn.content) for turn in fork[:-2]} <= parent


def test_subagent_wire_gives_no_turns() -> None:
    assert read(WIRE.parent / "subagents" / "a7c31e02" / "wire.jsonl").turns == []


def test_project_map_is_kimis_own_md5_of_the_work_dir() -> None:
    assert kimi.load_projects(FIXTURES) == {
        "aba723d5ea38e0b657ee4c05d39f2579": WORK_DIR,
        f"ssh_{kimi.work_dir_folder('/srv/remote-box')}": "/srv/remote-box",
    }
    assert kimi.load_projects(FIXTURES / "absent") == {}
    # the registry finds kimi.json by itself above the sessions folder
    found = read_session(WIRE)
    assert {turn.project for turn in parse(Source.KIMI, str(WIRE), found.records, mtime=MTIME).turns} == {WORK_DIR}


def test_wire_is_detected_anywhere_and_context_is_not_a_session_file(tmp_path: Path) -> None:
    copy = tmp_path / "kimi-session.jsonl"
    shutil.copy(WIRE, copy)
    assert detect(copy, copy.read_bytes()[:16384]) is Source.KIMI
    context = WIRE.parent / "context.jsonl"
    assert detect(context, context.read_bytes()) is None


def test_a_live_read_mid_answer_holds_it_back_and_resumes_at_its_first_fragment(tmp_path: Path) -> None:
    lines = WIRE.read_bytes().split(b"\n")
    live = tmp_path / "sessions" / "aba723d5ea38e0b657ee4c05d39f2579" / "6f2b1c9e" / "wire.jsonl"
    live.parent.mkdir(parents=True)
    live.write_bytes(b"\n".join(lines[:13]) + b"\n")  # the CLI has streamed two fragments of the 2nd answer
    first = read_session(live)
    parsed = parse(Source.KIMI, str(live), first.records, mtime=MTIME, projects={}, final=False)
    assert [turn.content for turn in parsed.turns] == [
        "Why does the retry loop never stop?",
        "Let me read `retry.py` first.",
    ]
    assert (parsed.resume_offset, parsed.resume_line) == (len(b"\n".join(lines[:11])) + 1, 12)
    live.write_bytes(WIRE.read_bytes())  # the rest arrives
    assert parsed.resume_offset is not None and parsed.resume_line is not None
    second = read_session(live, offset=parsed.resume_offset, line=parsed.resume_line)
    resumed = parse(Source.KIMI, str(live), second.records, mtime=MTIME, projects={}, final=False)
    assert [(turn.role, turn.content, turn.line) for turn in resumed.turns][:2] == [
        ("assistant", "`attempts` is reset inside the loop;", 12),
        ("user", "and keep the delay linear", 14),
    ]
    # by default (final) what was read is emitted as far as it goes
    assert parse(Source.KIMI, str(live), first.records, mtime=MTIME, projects={}).turns[-1].content == (
        "`attempts` is reset inside the loop;"
    )


#: A real Kimi CLI sub-agent transcript (Oct 2025; ``tests/fixtures/capture/real/SOURCES.md``): the main agent's
#: brief to the sub-agent as its ``user`` line, then the sub-agent's own replies and tool calls.
REAL_SUBAGENT = (
    Path(__file__).parents[2]
    / "fixtures/capture/real/kimi/sessions/00d5060aaec3fda180930ea52304b87b"
    / "531d195b-6436-426e-b010-4bf723a992de_read_1.jsonl"
)


def test_the_names_kimi_cli_gave_a_task_sub_agents_log_give_no_turns(tmp_path: Path) -> None:
    # kimi-cli's Task tool (src/kimi_cli/tools/task/__init__.py) wrote the sub-agent's context beside the
    # session's: `<session>-sub-<n>.jsonl` until 2025-09-26, `<session>_sub_<n>.jsonl` until 2025-11-25, then
    # `context_sub_<n>.jsonl` in the session's folder. None is something the person said.
    folder = tmp_path / ".kimi" / "sessions" / "00d5060aaec3fda180930ea52304b87b"
    session = "531d195b-6436-426e-b010-4bf723a992de"
    names = [
        f"{session}-sub-1.jsonl",
        f"{session}_sub_2.jsonl",
        f"{session}_read_1.jsonl",
        f"{session}/context_sub_1.jsonl",
    ]
    for name in names:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REAL_SUBAGENT, path)
        assert read(path, final=True).turns == [], name
        source = detect(path, path.read_bytes()[:16384])
        assert (
            source is None or parse(source, str(path), read_session(path, final=True).records, mtime=MTIME).turns == []
        )
    # The session's own log and its rotation (after /clear) are still read.
    assert kimi.is_subagent_file(str(folder / f"{session}.jsonl")) is False
    assert kimi.is_subagent_file(str(folder / f"{session}_1.jsonl")) is False


def test_a_real_kimi_code_sub_agents_wire_gives_no_turns_where_the_cli_keeps_it_or_read_alone(tmp_path: Path) -> None:
    # The wire of the sub-agent that kimi-code-assistant_tools-wire.jsonl ran ("run subagent to count swift
    # files"): its prompt is the main agent's brief (origin system_trigger/subagent), not the person's.
    real = Path(__file__).parents[2] / "fixtures/capture/real/kimi/kimi-code-subagent-agent-0-wire.jsonl"
    session = tmp_path / ".kimi-code" / "sessions" / "wd_0123456789ab" / "session_1"
    kept = session / "agents" / "agent-0" / "wire.jsonl"
    kept.parent.mkdir(parents=True)
    shutil.copy(real, kept)
    assert detect(kept, kept.read_bytes()[:16384]) is Source.KIMI
    assert read(kept, final=True).turns == []
    alone = tmp_path / "export" / "wire.jsonl"  # a copy read by `memstream ingest FILE`: no layout to go by
    alone.parent.mkdir()
    shutil.copy(real, alone)
    assert read(alone, final=True).turns == []

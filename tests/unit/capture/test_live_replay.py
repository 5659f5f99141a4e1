"""The live-capture replay (tests/support/live_capture.py) itself: the exchanges it expects, the way it writes
a session, and what it counts as whole, wrong-project and orphan. The replay of every real session is in
test_live_fidelity.py."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import live_capture as lc


def test_exchanges_pair_back_to_back_questions_with_the_last_thing_said() -> None:
    turns = [
        {"role": "user", "text": "fix the build"},
        {"role": "user", "text": "and the tests"},
        {"role": "assistant", "text": "Looking."},
        {"role": "assistant", "text": "Done: both fixed."},
        {"role": "user", "text": "thanks"},
        {"role": "user", "text": "fix the build"},  # repeated in the session: counted once
    ]
    assert lc.exchanges_of(turns) == (
        lc.Exchange(("fix the build", "and the tests"), "Done: both fixed."),
        lc.Exchange(("thanks",), ""),
    )


def test_a_jsonl_session_grows_at_line_boundaries_and_ends_as_recorded(tmp_path: Path) -> None:
    for recorded in lc.recorded_sessions():
        session = lc.replayed(recorded, tmp_path)
        data = recorded.path.read_bytes()
        assert session.steps[-1] == data
        assert len(session.steps) <= lc.CHUNKS
        if recorded.cli != "gemini":
            assert all(data.startswith(step) and step.endswith(b"\n") for step in session.steps[:-1])
        else:  # rewritten whole, one JSON document each time, with more messages
            counts = [len(json.loads(step)["messages"]) for step in session.steps]
            assert counts == sorted(counts) and counts[0] >= 1


def test_a_claude_session_goes_where_the_cli_files_it_and_follows_the_recorded_cd(tmp_path: Path) -> None:
    (recorded,) = lc.recorded_sessions(only=["58ad9e0d5c"])
    session = lc.replayed(recorded, tmp_path)
    assert session.path.parent.name == "-Users-moonshot-dev-working-kimi-kimi-cli"
    assert session.cwds[0] == recorded.project
    assert session.cwds[-1] == f"{recorded.project}/web"  # the agent ran `cd web`
    hook = lc.payload("claude-code", "Stop", session, len(session.steps) - 1)
    assert hook["cwd"] == f"{recorded.project}/web" and hook["transcript_path"] == str(session.path)


def test_the_score_counts_whole_exchanges_wrong_projects_and_orphans(tmp_path: Path) -> None:
    recorded = lc.Recorded(
        "codex",
        Path("rollout-2026-01-01T00-00-00-x.jsonl"),
        "/src/app",
        (lc.Exchange(("why?",), "because " + "x" * 400 + " the end"), lc.Exchange(("and then?",), "then this")),
    )
    session = lc.Replayed(recorded, tmp_path / "absent.jsonl", "s1", [b""], ["/src/app"])
    long_answer_cut = "because " + "x" * 150 + " […] " + "x" * 150 + " the end"
    memories = [
        lc.Stored("/src/app", "s1", f"[user] why?\n[assistant] {long_answer_cut}"),
        lc.Stored("/src/app/web", "s1", "[user] and then?\n[assistant] then this"),
        lc.Stored("/src/app", "s1", "[assistant] then this"),
    ]
    (figures,) = lc.score([session], memories).values()
    assert (figures.exchanges, figures.whole, figures.wrong_project, figures.orphans) == (2, 1, 1, 1)
    assert not figures.met

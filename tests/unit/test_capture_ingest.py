"""The ingest machinery on a test-only format: checkpoints, first-seen dedup, rewrites, dry run, --json."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from memstream.capture.ingest import Capture, dedup_key
from memstream.capture.model import Source
from memstream.capture.run import ingest, parse_since
from memstream.capture.state import CaptureState
from memstream.identity import turn_hash
from memstream.settings import Settings
from tests.unit.capture_fakes import FakeFormats, header, message, session_file


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.from_env({}, data_dir=tmp_path / "data")


def run(settings: Settings, *paths: Path, formats: FakeFormats | None = None, **options: object) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = ingest(settings, list(paths), formats=formats or FakeFormats(), out=out, err=err, **options)  # type: ignore[arg-type]
    return code, out.getvalue() + err.getvalue()


def spooled(settings: Settings) -> list[dict[str, object]]:
    with CaptureState.open(settings.capture_db) as state:
        return [s.payload for s in state.spooled(100_000)]


def test_a_folder_is_spooled_in_order_with_provenance_and_a_rerun_adds_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    a = session_file(tmp_path / "s" / "a.jsonl", "sa", 4)
    session_file(tmp_path / "s" / "b.jsonl", "sb", 2, cwd="/work/api")
    code, output = run(settings, tmp_path / "s")
    assert code == 0
    turns = spooled(settings)
    assert [(t["session_id"], t["content"]) for t in turns] == [
        *(("sa", f"message {i} of the session") for i in range(4)),
        *(("sb", f"message {i} of the session") for i in range(2)),
    ]
    first = turns[0]
    assert first["provenance"] == {"source_type": "claude", "session_id": "sa", "file": str(a), "line": 2}
    assert (first["project"], first["role"], first["ts"]) == ("/work/shop", "user", "2026-02-03T12:00:00Z")
    assert first["hash"] == turn_hash("message 0 of the session")
    assert "6 new" in output and "not running" in output

    code, output = run(settings, tmp_path / "s")
    assert code == 0
    assert len(spooled(settings)) == 6
    assert "0 new" in output


def test_an_unchanged_file_is_not_even_opened_on_a_rerun(settings: Settings, tmp_path: Path) -> None:
    session_file(tmp_path / "a.jsonl", "sa", 4)
    run(settings, tmp_path / "a.jsonl")
    formats = FakeFormats()
    run(settings, tmp_path / "a.jsonl", formats=formats)
    assert formats.reads == []


def test_a_file_grown_by_three_turns_adds_three_read_from_its_checkpoint(settings: Settings, tmp_path: Path) -> None:
    path = session_file(tmp_path / "a.jsonl", "sa", 4)
    run(settings, path)
    size = path.stat().st_size
    with path.open("a") as handle:
        handle.write(message(4) + message(5) + message(6))
    formats = FakeFormats()
    run(settings, path, formats=formats)
    assert formats.reads == [(path, size)]
    turns = spooled(settings)
    assert [t["content"] for t in turns[4:]] == [f"message {i} of the session" for i in (4, 5, 6)]
    # The session and project came from the header line, which the incremental read did not cover.
    assert {(t["session_id"], t["project"]) for t in turns[4:]} == {("sa", "/work/shop")}
    assert [t["provenance"]["line"] for t in turns[4:]] == [6, 7, 8]  # type: ignore[index]


def test_a_half_written_last_line_is_read_once_it_is_complete(settings: Settings, tmp_path: Path) -> None:
    path = session_file(tmp_path / "a.jsonl", "sa", 2)
    late = message(2)
    with path.open("a") as handle:
        handle.write(late[:10])
    run(settings, path)
    assert len(spooled(settings)) == 2
    with path.open("a") as handle:
        handle.write(late[10:])
    run(settings, path)
    assert [t["content"] for t in spooled(settings)][-1] == "message 2 of the session"
    assert len(spooled(settings)) == 3


def test_a_rewritten_file_is_reread_and_only_what_changed_is_added(settings: Settings, tmp_path: Path) -> None:
    path = session_file(tmp_path / "a.jsonl", "sa", 4)
    run(settings, path)
    # Rewritten in place (as Gemini CLI rewrites its JSON and Kimi its context): one message edited,
    # one added; same size or not, the fingerprint of the read prefix no longer matches.
    path.write_text(
        header("sa") + message(0) + message(1, text="an edited reply") + message(2) + message(3) + message(4)
    )
    formats = FakeFormats()
    _, output = run(settings, path, formats=formats)
    assert formats.reads == [(path, 0)]
    assert [t["content"] for t in spooled(settings)[4:]] == ["an edited reply", "message 4 of the session"]
    assert "2 new" in output


def test_a_replaced_file_with_a_new_inode_is_reread_without_duplicates(settings: Settings, tmp_path: Path) -> None:
    path = session_file(tmp_path / "a.jsonl", "sa", 3)
    run(settings, path)
    replacement = session_file(tmp_path / "b.tmp", "sa", 5)
    os.replace(replacement, path)
    run(settings, path)
    assert [t["content"] for t in spooled(settings)] == [f"message {i} of the session" for i in range(5)]


def test_the_same_message_in_another_file_of_the_session_is_published_once_with_its_first_provenance(
    settings: Settings, tmp_path: Path
) -> None:
    first = session_file(tmp_path / "a.jsonl", "sa", 2)
    run(settings, first)
    # A resumed session's new file begins with copies of the earlier lines.
    copy = tmp_path / "b.jsonl"
    copy.write_text(header("sa") + message(0) + message(1) + message(2))
    run(settings, copy)
    turns = spooled(settings)
    assert [t["content"] for t in turns] == [f"message {i} of the session" for i in range(3)]
    assert turns[0]["provenance"]["file"] == str(first)  # type: ignore[index]
    with CaptureState.open(settings.capture_db) as state:
        key = dedup_key("sa", "user", turn_hash("message 0 of the session"))
        assert state.first_seen(key) == (str(first), 2)


def test_the_same_words_in_two_sessions_are_two_messages(settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(header("sa") + message(0, text="yes") + message(1, text="Done."))
    (tmp_path / "b.jsonl").write_text(header("sb") + message(0, text="yes\r\n") + message(1, text="Done."))
    run(settings, tmp_path)
    assert [(t["session_id"], t["content"]) for t in spooled(settings)] == [
        ("sa", "yes"),
        ("sa", "Done."),
        ("sb", "yes\r\n"),
        ("sb", "Done."),
    ]


def test_dry_run_writes_nothing_and_says_per_source_and_session_what_it_would_publish(
    settings: Settings, tmp_path: Path
) -> None:
    session_file(tmp_path / "a.jsonl", "sa", 4)
    session_file(tmp_path / "b.jsonl", "sb", 1, cwd="/work/api")
    code, output = run(settings, tmp_path, dry_run=True)
    assert code == 0
    assert not settings.capture_db.exists()
    assert not settings.data_dir.exists()
    assert "claude  session sa  4 turns  (/work/shop)" in output
    assert "claude  session sb  1 turn  (/work/api)" in output
    assert "dry run: nothing published" in output


def test_dry_run_after_a_real_run_counts_what_is_already_seen(settings: Settings, tmp_path: Path) -> None:
    path = session_file(tmp_path / "a.jsonl", "sa", 2)
    run(settings, path)
    with path.open("a") as handle:
        handle.write(message(2))
    before = settings.capture_db.read_bytes()
    _, output = run(settings, path, dry_run=True)
    assert "session sa  1 turn" in output
    assert settings.capture_db.read_bytes() == before


def test_json_prints_exactly_the_turns_one_object_a_line(settings: Settings, tmp_path: Path) -> None:
    path = session_file(tmp_path / "a.jsonl", "sa", 2)
    out = io.StringIO()
    code = ingest(settings, [path], formats=FakeFormats(), dry_run=True, as_json=True, out=out, err=io.StringIO())
    assert code == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines == [
        {
            "session_id": "sa",
            "project": "/work/shop",
            "role": role,
            "content": f"message {i} of the session",
            "ts": f"2026-02-03T12:00:0{i}Z",
            "source": "claude",
            "provenance": {"file": str(path), "line": i + 2},
        }
        for i, role in enumerate(("user", "assistant"))
    ]


def test_a_malformed_file_is_reported_with_file_and_line_and_never_stops_the_run(
    settings: Settings, tmp_path: Path
) -> None:
    bad = tmp_path / "a.jsonl"
    bad.write_bytes(header("sa").encode() + message(0).encode() + b"{not json\n" + b"\xff\xfe\n" + message(1).encode())
    session_file(tmp_path / "b.jsonl", "sb", 2)
    code, output = run(settings, tmp_path)
    assert code == 0
    assert f"{bad}:3: invalid JSON" in output and f"{bad}:4: invalid JSON" in output
    assert len(spooled(settings)) == 4


def test_exit_status_is_non_zero_only_when_nothing_could_be_read(settings: Settings, tmp_path: Path) -> None:
    assert run(settings, tmp_path / "nothing-here")[0] == 1
    (tmp_path / "notes.jsonl").write_text('{"not": "a session"}\n')
    assert run(settings, tmp_path / "notes.jsonl")[0] == 1


def test_since_skips_older_messages(settings: Settings, tmp_path: Path) -> None:
    session_file(tmp_path / "a.jsonl", "sa", 4)
    run(settings, tmp_path, since=parse_since("2026-02-03T12:00:02Z"))
    assert [t["content"] for t in spooled(settings)] == ["message 2 of the session", "message 3 of the session"]


def test_a_message_taken_by_another_process_meanwhile_is_not_spooled_twice(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = session_file(tmp_path / "a.jsonl", "sa", 2)
    with CaptureState.open(settings.capture_db) as one, CaptureState.open(settings.capture_db) as two:
        first, second = Capture(one, FakeFormats()), Capture(two, FakeFormats())
        second.preload_checkpoints()  # an ingest run's view, taken before a hook committed
        first.file(path)
        # The second looked before the first committed: its decision says new, its transaction says no.
        monkeypatch.setattr(two, "is_seen", lambda key: False)
        outcome = second.file(path, Source.CLAUDE)
        assert outcome.new == [] and outcome.seen == 2
    assert len(spooled(settings)) == 2


def test_a_session_without_a_known_project_is_summarised_once_with_the_fix_and_fails_the_run(
    settings: Settings, tmp_path: Path
) -> None:
    export = session_file(tmp_path / "export.jsonl", "sx", 6, cwd="")
    code, output = run(settings, export, dry_run=True)
    assert code == 1  # the one source given gave no turn at all
    assert output.count("skipped: no project directory") == 1
    assert "6 turns of session sx skipped" in output and f"--project DIR {export}" in output
    assert f"{export} gave no turn: its project cannot be known from the file; name it with --project DIR" in output


def test_project_names_the_project_of_a_file_that_cannot_know_it_also_in_json(
    settings: Settings, tmp_path: Path
) -> None:
    export = session_file(tmp_path / "export.jsonl", "sx", 2, cwd="")
    known = session_file(tmp_path / "known.jsonl", "sk", 2, cwd="/work/api")
    out = io.StringIO()
    code = ingest(
        settings,
        [export, known],
        formats=FakeFormats(),
        as_json=True,
        dry_run=True,
        project="/work/shop",
        out=out,
        err=io.StringIO(),
    )
    assert code == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {(line["session_id"], line["project"]) for line in lines} == {("sx", "/work/shop"), ("sk", "/work/api")}


def test_turns_skipped_for_want_of_a_project_are_taken_by_a_later_run_that_names_it(
    settings: Settings, tmp_path: Path
) -> None:
    export = session_file(tmp_path / "export.jsonl", "sx", 2, cwd="")
    assert run(settings, export)[0] == 1
    assert spooled(settings) == []
    assert run(settings, export, project="/work/shop")[0] == 0
    assert [(t["session_id"], t["project"]) for t in spooled(settings)] == [("sx", "/work/shop")] * 2


def test_exit_status_is_non_zero_when_one_given_source_gave_no_turn(settings: Settings, tmp_path: Path) -> None:
    good = session_file(tmp_path / "good.jsonl", "sa", 2)
    (tmp_path / "empty").mkdir()
    code, output = run(settings, good, tmp_path / "empty")
    assert code == 1
    assert f"{tmp_path / 'empty'} gave no turn: no session file of a known CLI in it" in output
    assert len(spooled(settings)) == 2
    assert run(settings, good)[0] == 0  # unchanged since: it gave its turns before

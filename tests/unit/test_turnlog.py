"""The durable turn log (memstream.intake.turnlog): order, fsync, done, retention, forget, several writers."""

from __future__ import annotations

import dataclasses
import multiprocessing
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstream.identity import project_key, turn_session_key, user_key
from memstream.intake.forget import forget_event
from memstream.intake.turnlog import Logged, TurnLog, enabled, forget_logged, path_of
from memstream.schemas import Turn, decode, encode
from memstream.settings import Settings


def turn(session: str, role: str, content: str, *, project: str = "/p", user: str = "u@x") -> Turn:
    return Turn(session_id=session, project=project, role=role, content=content, ts=datetime.now(UTC), user=user)  # type: ignore[arg-type]


#: The turns table as logs before acks and before version 2 had it.
OLD_SHAPE = """CREATE TABLE turns (seq INTEGER PRIMARY KEY AUTOINCREMENT, accepted REAL NOT NULL,
    session TEXT NOT NULL, user_key TEXT NOT NULL, project_key TEXT NOT NULL, role TEXT NOT NULL,
    published INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0, event BLOB NOT NULL);
CREATE INDEX turns_unfinished ON turns (seq) WHERE done = 0;
"""


def contents(items: list[Logged]) -> list[str]:
    turns = [decode(item.event) for item in items]
    return [t.content for t in turns if isinstance(t, Turn)]


def test_appends_in_order_with_their_session_key(tmp_path: Path) -> None:
    with TurnLog(tmp_path / "log.db") as log:
        first = log.append([turn("a", "user", "q1"), turn("b", "user", "q2")])
        second = log.append([turn("a", "assistant", "a1")])
        assert first == [1, 2] and second == [3]
        items = list(log.unfinished())
    assert contents(items) == ["q1", "q2", "a1"]
    assert items[0].key == turn_session_key("a", "/p", "u@x")


def test_every_append_is_fsynced(tmp_path: Path) -> None:
    with TurnLog(tmp_path / "log.db") as log:
        assert log._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert log._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL: the WAL is fsynced per commit
        log.append([turn("a", "user", "q")])
        log.published([1])
        assert log._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # back to FULL for the next append
    # A reader that is not this process sees it (it is on disk, not in a cache).
    with sqlite3.connect(tmp_path / "log.db") as other:
        assert other.execute("SELECT COUNT(*) FROM turns").fetchone()[0] == 1


def test_done_needs_published_and_waits_for_a_sessions_answer(tmp_path: Path) -> None:
    with TurnLog(tmp_path / "log.db") as log:
        log.append([turn("a", "user", "q1"), turn("a", "assistant", "a1"), turn("a", "user", "q2")])
        log.append([turn("b", "user", "q3")])
        assert log.mark_done(4, open_before=0) == 0  # nothing acknowledged by the broker yet
        log.published([1, 2, 3])
        assert log.last_published() == 3
        # q2 waits in its session's window for an answer; q3 was never published.
        assert log.mark_done(4, open_before=0) == 2
        assert contents(list(log.unfinished())) == ["q2", "q3"]
        # Past the idle timer, a question left alone was stored by the snapshot stage's timer.
        assert log.mark_done(4, open_before=time.time() + 1) == 1
        assert contents(list(log.unfinished())) == ["q3"]


def test_retention_deletes_only_done_turns(tmp_path: Path) -> None:
    with TurnLog(tmp_path / "log.db") as log:
        log.append([turn("a", "user", "q1"), turn("a", "assistant", "a1"), turn("b", "user", "q2")])
        log.published([1, 2])
        log.mark_done(2, open_before=0)
        assert log.expire(time.time() + 1) == 2
        assert contents(log.all()) == ["q2"]  # unfinished: kept until stored


def test_forget_removes_a_users_or_a_projects_turns(tmp_path: Path) -> None:
    with TurnLog(tmp_path / "log.db") as log:
        log.append([turn("a", "user", "mine", user="me@x"), turn("b", "user", "theirs", user="them@x")])
        log.append([turn("c", "user", "elsewhere", project="/q", user="them@x")])
        assert log.forget(user_key=user_key("me@x")) == 1
        assert log.forget(project_key=project_key("/q")) == 1
        assert log.forget(project_key=project_key("/p"), before=time.time() - 3600) == 0  # said after it
        assert contents(log.all()) == ["theirs"]


def test_forget_logged_follows_the_forget_event(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    with TurnLog(path_of(settings)) as log:
        log.append([turn("a", "user", "mine", user="me@x"), turn("b", "user", "theirs", user="them@x")])
    assert forget_logged(settings, forget_event(user="me@x")) == 1
    with TurnLog(path_of(settings)) as log:
        assert contents(log.all()) == ["theirs"]


def test_on_by_default_only_with_the_embedded_broker(tmp_path: Path) -> None:
    assert enabled(Settings(data_dir=tmp_path))
    external = Settings(data_dir=tmp_path, kafka_bootstrap="kafka:9092")
    assert not enabled(external)
    assert enabled(dataclasses.replace(external, turn_log="on"))
    assert not enabled(Settings(data_dir=tmp_path, turn_log="off"))
    assert TurnLog.for_settings(external) is None


def _append_many(path: str, writer: int, count: int) -> None:
    with TurnLog(Path(path)) as log:
        for i in range(count):
            log.append([turn(f"w{writer}", "user", f"{writer}-{i}"), turn(f"w{writer}", "assistant", f"{writer}-{i}!")])


@pytest.mark.timeout(120)
def test_several_processes_append_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "log.db")
    TurnLog(Path(path)).close()
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_append_many, args=(path, w, 40)) for w in range(3)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=100)
        assert process.exitcode == 0
    with TurnLog(Path(path)) as log:
        items = log.all()
    assert len(items) == 3 * 40 * 2
    for w in range(3):  # each writer's turns, and each append's pair, in its order
        mine = [c for c in contents(items) if c.startswith(f"{w}-")]
        assert mine == [c for i in range(40) for c in (f"{w}-{i}", f"{w}-{i}!")]
    assert [item.seq for item in items] == sorted(item.seq for item in items)


def test_published_marks_runs_of_seqs_and_nothing_else(tmp_path: Path) -> None:
    from memstream.intake.turnlog import _PUBLISHED, _runs, prepare

    assert list(_runs([1, 2, 3, 7, 9, 10])) == [(1, 3), (7, 7), (9, 10)]
    assert list(_runs([])) == []
    turns = [turn("a", "user", f"q{i}") for i in range(6)]
    with TurnLog(tmp_path / "t.db") as log:
        seqs = log.append(turns[:3]) + log.append(turns[3:], [prepare(t) for t in turns[3:]])
        log.published([seqs[0], seqs[1], seqs[3]])
        assert contents(list(log.unfinished())) == [f"q{i}" for i in range(6)]
        assert {item.key for item in log.unfinished()} == {turn_session_key("a", "/p", "u@x")}
        assert log.last_published() == seqs[3]
    with sqlite3.connect(tmp_path / "t.db") as db:
        flags = db.execute(f"SELECT {_PUBLISHED} FROM turns ORDER BY seq").fetchall()
        runs = db.execute("SELECT first, last FROM acks ORDER BY first").fetchall()
    assert [flag for (flag,) in flags] == [1, 1, 0, 1, 0, 0]
    assert runs == [(1, 2), (4, 4)]  # a run per run of seqs, not a row rewritten per turn


def test_a_log_flagged_per_turn_before_keeps_what_was_published(tmp_path: Path) -> None:
    from memstream.intake.turnlog import _PUBLISHED

    with sqlite3.connect(tmp_path / "t.db") as db:  # as a log written before acks existed: flags on the rows
        db.executescript(OLD_SHAPE)
        for i in range(4):
            db.execute(
                "INSERT INTO turns (accepted, session, user_key, project_key, role, published, done, event)"
                " VALUES (?, 'p_x/-/a', '', 'p_x', 'user', ?, ?, ?)",
                (time.time(), int(i < 3), int(i == 0), encode(turn("a", "user", f"q{i}"))),
            )
    with TurnLog(tmp_path / "t.db") as log:
        assert log.last_published() == 3
        flags = log._db.execute(f"SELECT seq FROM turns WHERE done = 0 AND {_PUBLISHED}").fetchall()
        assert [seq for (seq,) in flags] == [2, 3]
        assert log._db.execute("PRAGMA user_version").fetchone()[0] == 2


def test_appends_maintain_no_index_on_the_session_key(tmp_path: Path) -> None:
    """An index on the ~60-character session key cost ~8 of the ~19 µs of CPU an append spends per turn
    (bench/perf/durable_cost.py); marking done reads a range of seqs instead. A log made with the index
    loses it when opened."""
    with TurnLog(tmp_path / "log.db") as log:
        log._db.execute("CREATE INDEX IF NOT EXISTS turns_session ON turns (session, seq)")  # as an older log has it
    with TurnLog(tmp_path / "log.db") as log:
        indexes = {row[1] for row in log._db.execute("PRAGMA index_list(turns)")}
        assert "turns_session" not in indexes
        assert "turns_unfinished" in indexes


def test_a_question_is_done_once_a_later_answer_in_its_session_is_published(tmp_path: Path) -> None:
    with TurnLog(tmp_path / "log.db") as log:
        log.append([turn("a", "user", "q1"), turn("b", "user", "q2"), turn("b", "assistant", "a2")])
        log.published([1, 2, 3])
        assert log.mark_done(3, open_before=0) == 2  # q2 and a2; q1 waits for its answer
        log.append([turn("b", "user", "q3"), turn("a", "assistant", "a1")])
        log.published([4, 5])
        assert log.mark_done(5, open_before=0) == 2  # q1 and a1 now; q3 waits
        assert contents(list(log.unfinished())) == ["q3"]


def test_a_turns_row_holds_no_scope_key_its_session_key_names_both(tmp_path: Path) -> None:
    """The user and project keys are parts of the session key (memstream.identity.session_key): two
    more columns cost ~4 µs of CPU a turn on every append (hashing and wider rows); forget reads the
    session key instead."""
    with TurnLog(tmp_path / "log.db") as log:
        columns = {row[1] for row in log._db.execute("PRAGMA table_info(turns)")}
        assert columns == {"seq", "accepted", "session", "role", "done", "event"}
        log.append([turn("a", "user", "mine", user="me@x"), turn("a", "user", "anon", user="")])
        log.append([turn("c", "user", "same key as a project", project="/q/u_x", user="them@x")])
        assert log.forget(user_key=user_key("them@x")) == 1
        assert log.forget(project_key=project_key("/p")) == 2
        assert log.count() == 0


def test_a_log_with_scope_columns_keeps_its_turns_and_forgets_by_session_key(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "log.db") as db:  # a log as written before: scope keys and flags per row
        db.executescript(
            OLD_SHAPE + "CREATE TABLE acks (first INTEGER PRIMARY KEY, last INTEGER NOT NULL); PRAGMA user_version = 1;"
        )
        for t in (turn("a", "user", "mine", user="me@x"), turn("b", "user", "theirs", user="them@x")):
            db.execute(
                "INSERT INTO turns (accepted, session, user_key, project_key, role, event) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    time.time(),
                    turn_session_key(t.session_id, t.project, t.user),
                    user_key(t.user),
                    project_key(t.project),
                    t.role,
                    encode(t),
                ),
            )
        db.execute("INSERT INTO acks VALUES (1, 2)")
    with TurnLog(tmp_path / "log.db") as log:
        columns = {row[1] for row in log._db.execute("PRAGMA table_info(turns)")}
        assert columns == {"seq", "accepted", "session", "role", "done", "event"}
        assert log.last_published() == 2
        log.append([turn("c", "user", "new", user="me@x")])
        assert log.forget(user_key=user_key("me@x")) == 2
        assert contents(log.all()) == ["theirs"]


def test_a_new_log_has_large_pages_and_leaves_checkpoints_off_its_appends(tmp_path: Path) -> None:
    """A WAL commit writes each page as a frame of its own: 16 KB pages cost a batch's commit a third
    of the CPU of 4 KB ones. And an append never copies the WAL into the database (SQLite's
    auto-checkpoint, which held a batch's sends back): :meth:`TurnLog.checkpoint` does, off that path."""
    from memstream.intake.turnlog import BACKSTOP_PAGES, PAGE_SIZE

    path = tmp_path / "log.db"
    with TurnLog(path) as log:
        assert log._db.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE == 16_384
        assert log._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == BACKSTOP_PAGES
        before = path.stat().st_size
        log.append([turn("a", "user", "x" * 2_000) for _ in range(200)])  # ~27 pages, past no backstop
        assert path.stat().st_size == before  # all of it in the WAL still
        assert log.checkpoint() > 0
        assert path.stat().st_size > before
        assert log.count() == 200


async def test_the_done_sweep_checkpoints_the_log_even_when_it_cannot_look(tmp_path: Path) -> None:
    from memstream.worker.durable import DoneSweep

    settings = Settings(data_dir=tmp_path, turn_log="on")
    with TurnLog(path_of(settings)) as log:
        log.append([turn("a", "user", "x" * 2_000) for _ in range(200)])
        size = path_of(settings).stat().st_size
        sweep = DoneSweep(settings)
        try:
            assert await sweep.tick(None, "127.0.0.1:9") == 0  # no app to look at: nothing marked
        finally:
            await sweep.close()
        assert path_of(settings).stat().st_size > size


def _steps(log: TurnLog, through: int) -> int:
    """SQLite's virtual machine steps one mark_done takes (a count, not a time: the same on a busy machine)."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    log._db.set_progress_handler(count, 100)
    try:
        log.mark_done(through, open_before=0)
    finally:
        log._db.set_progress_handler(None, 100)
    return steps[0] * 100


def test_marking_done_reads_no_more_with_a_turn_left_unacknowledged_long_ago(tmp_path: Path) -> None:
    """A turn whose send failed stays unacknowledged until the next start. The sweep's range read
    must not start at it: every look (each ~2 s) would then read every turn accepted since, so its CPU
    grew with the turns the log holds (bench/perf/turnlog_held.py --stuck)."""

    def exchanges(log: TurnLog, count: int) -> int:
        seqs: list[int] = []
        for i in range(count):
            seqs += log.append([turn(f"s{i}", "user", f"q{i}"), turn(f"s{i}", "assistant", f"a{i}")])
        log.published(seqs)
        return seqs[-1]

    with TurnLog(tmp_path / "log.db") as log:
        log.append([turn("stuck", "user", "never sent")])  # seq 1, never acknowledged
        log.mark_done(exchanges(log, 50), open_before=0)
        through = exchanges(log, 10)
        small = _steps(log, through)
    with TurnLog(tmp_path / "big.db") as log:
        log.append([turn("stuck", "user", "never sent")])
        log.mark_done(exchanges(log, 2_000), open_before=0)
        through = exchanges(log, 10)
        big = _steps(log, through)
        assert [t for t in contents(list(log.unfinished()))] == ["never sent"]
    assert big < 2 * small  # 40 times the turns held, not 40 times the reading


def test_a_run_acknowledged_right_after_another_extends_it(tmp_path: Path) -> None:
    """Runs are pruned only below the oldest unfinished turn: with one left unacknowledged, every
    append added a row that every mark_done then searched (bench/perf/turnlog_held.py --stuck)."""
    with TurnLog(tmp_path / "log.db") as log:
        log.append([turn("stuck", "user", "never sent")])
        for i in range(20):
            log.published(log.append([turn(f"s{i}", "user", f"q{i}"), turn(f"s{i}", "assistant", f"a{i}")]))
        log.published([50, 51])  # not next to any: a run of its own
        runs = log._db.execute("SELECT first, last FROM acks ORDER BY first").fetchall()
        assert runs == [(2, 41), (50, 51)]
        assert log.mark_done(41, open_before=0) == 40
        assert contents(list(log.unfinished())) == ["never sent"]

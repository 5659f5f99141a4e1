"""Capture's durable state, in one SQLite file in the data dir: checkpoints, first-seen hashes, spool.

One file, three tables, one transaction per session file read:

- ``files``: a checkpoint per session file (inode, size, mtime, the byte offset and line the next read
  starts at, and a fingerprint of the bytes already read), so a re-run reads only what was appended and
  a rewritten file is recognised;
- ``seen``: the dedup key of every message ever captured (the capture spec: first seen wins and keeps its
  provenance), and ``sessions``: the project directory each session was seen in;
- ``spool``: captured turns not yet acknowledged by the broker, in capture order. A hook or an ingest run
  writes its new turns here in the same transaction that advances the checkpoint and records their keys,
  so nothing read is ever lost, whether or not memstream is up; the spool is emptied as the broker acks.

SQLite rather than a compacted topic: hooks must decide what is new in milliseconds while memstream or
its broker is down, and several hooks, ``ingest`` and ``watch`` may run at once. SQLite's locking
serialises them per transaction, WAL with ``synchronous=FULL`` makes each commit durable (fsync), and the
stdlib module costs a hook nothing to import.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    inode INTEGER NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    line INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS seen (
    key TEXT PRIMARY KEY,
    file TEXT NOT NULL,
    line INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (
    source TEXT NOT NULL,
    session_id TEXT NOT NULL,
    project TEXT NOT NULL,
    PRIMARY KEY (source, session_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spool (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    payload TEXT NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where the last read of a session file stopped, and what the file looked like then."""

    path: str
    source: str
    inode: int
    size: int
    mtime_ns: int
    offset: int
    line: int
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Spooled:
    """A captured turn waiting for the broker: its spool sequence number, dedup key and turn fields."""

    seq: int
    key: str
    session_id: str
    payload: dict[str, Any]


class CaptureState:
    """The SQLite file; open with :meth:`open`, use as a context manager to close it."""

    def __init__(self, db: sqlite3.Connection, path: Path | None):
        self._db = db
        self.path = path

    @classmethod
    def open(cls, path: Path, *, readonly: bool = False) -> CaptureState:
        """Open (creating unless ``readonly``) the state file. A read-only open of a missing file is empty."""
        if readonly:
            if not path.exists():
                db = sqlite3.connect(":memory:", isolation_level=None)
                db.executescript(_SCHEMA)
                return cls(db, None)
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, timeout=10)
            return cls(db, path)
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, isolation_level=None, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.executescript(_SCHEMA)
        return cls(db, path)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> CaptureState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction that takes the lock at once, so concurrent writers queue instead of failing."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # --- checkpoints ---------------------------------------------------------------------

    def checkpoints(self) -> dict[str, Checkpoint]:
        """Every checkpoint, by path: one query, for the stat-only pass over unchanged files."""
        rows = self._db.execute(
            "SELECT path, source, inode, size, mtime_ns, offset, line, fingerprint FROM files"
        ).fetchall()
        return {row[0]: Checkpoint(*row) for row in rows}

    def checkpoint(self, path: str) -> Checkpoint | None:
        row = self._db.execute(
            "SELECT path, source, inode, size, mtime_ns, offset, line, fingerprint FROM files WHERE path = ?", (path,)
        ).fetchone()
        return Checkpoint(*row) if row else None

    def unfinished(self, held_mtime: int) -> list[Checkpoint]:
        """Checkpoints of files read only in part: a reply held back (mtime ``held_mtime``), or a read that
        stopped before the file's size (an adapter resumes at an unfinished message, a last line is cut)."""
        rows = self._db.execute(
            "SELECT path, source, inode, size, mtime_ns, offset, line, fingerprint FROM files "
            "WHERE mtime_ns = ? OR offset < size",
            (held_mtime,),
        ).fetchall()
        return [Checkpoint(*row) for row in rows]

    def save_checkpoint(self, cp: Checkpoint) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (cp.path, cp.source, cp.inode, cp.size, cp.mtime_ns, cp.offset, cp.line, cp.fingerprint, time.time()),
        )

    # --- first seen ----------------------------------------------------------------------

    def is_seen(self, key: str) -> bool:
        return self._db.execute("SELECT 1 FROM seen WHERE key = ?", (key,)).fetchone() is not None

    def mark_seen(self, key: str, file: str, line: int) -> bool:
        """Record a message's key; False if it was seen before (first seen wins, with its provenance)."""
        cursor = self._db.execute("INSERT OR IGNORE INTO seen VALUES (?, ?, ?)", (key, file, line))
        return cursor.rowcount == 1

    def first_seen(self, key: str) -> tuple[str, int] | None:
        row = self._db.execute("SELECT file, line FROM seen WHERE key = ?", (key,)).fetchone()
        return (row[0], row[1]) if row else None

    def project_of(self, source: str, session_id: str) -> str:
        row = self._db.execute(
            "SELECT project FROM sessions WHERE source = ? AND session_id = ?", (source, session_id)
        ).fetchone()
        return str(row[0]) if row else ""

    def remember_project(self, source: str, session_id: str, project: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?, ?)", (source, session_id, project))

    # --- spool -----------------------------------------------------------------------------

    def spool(self, key: str, session_id: str, payload: dict[str, Any]) -> None:
        """Queue a turn for the broker; a key already queued is not queued twice."""
        self._db.execute(
            "INSERT OR IGNORE INTO spool (key, session_id, payload) VALUES (?, ?, ?)",
            (key, session_id, json.dumps(payload, separators=(",", ":"))),
        )

    def spooled(self, limit: int) -> list[Spooled]:
        """The oldest spooled turns, in capture order."""
        rows = self._db.execute("SELECT seq, key, session_id, payload FROM spool ORDER BY seq LIMIT ?", (limit,))
        return [Spooled(seq, key, session, json.loads(payload)) for seq, key, session, payload in rows]

    def spool_size(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM spool").fetchone()[0])

    def last_reads(self) -> list[tuple[str, int, float]]:
        """Per CLI: session files followed, and when one was last read (a hook, ingest or watch; epoch s)."""
        rows = self._db.execute("SELECT source, count(*), max(updated_at) FROM files GROUP BY source ORDER BY source")
        return [(str(source), int(files), float(last)) for source, files, last in rows]

    def unspool(self, seqs: Iterable[int]) -> None:
        """Drop turns the broker acknowledged."""
        with self.transaction():
            self._db.executemany("DELETE FROM spool WHERE seq = ?", [(seq,) for seq in seqs])

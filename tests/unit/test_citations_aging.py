"""The aging stage retires memories whose code is long gone (issue 39): every cited file deleted by a
commit MEMSTREAM_CODE_GONE_DAYS old, audited as aged-out, restorable, and only where the work tree is."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from agents.age import code_gone, sweep_code
from memstream.console import actions
from memstream.recall.staleness import Checker
from memstream.rules import audit
from memstream.schemas import Citation, HistoryRecord, Memory, Provenance
from memstream.schemas.memory import FORGOTTEN_MARK
from memstream.settings import Settings
from tests.unit.test_citations_capture import make_repo
from tests.unit.test_staleness import cite

NOW = datetime.now(UTC)


def commit_at(repo: Path, message: str, when: datetime) -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": when.isoformat(), "GIT_COMMITTER_DATE": when.isoformat()}
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", message], check=True, env=env)
    out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def memory(mid: str, citations: list[Citation], updated: datetime) -> Memory:
    return Memory(
        id=mid, text=f"memory {mid}", type="architecture", scope="project", scope_key="p",
        created_at=NOW - timedelta(days=90), updated_at=updated, content_hash=mid, embedding_model="e",
        sources=[Provenance(source_type="claude", citations=citations)],
    )  # fmt: skip


class Store:
    def __init__(self, memories: list[Memory]) -> None:
        self.memories = memories

    async def scopes(self, *, limit: int = 1000) -> dict[str, int]:
        return {"p": len(self.memories)}

    async def list(self, scope_keys: list[str], *, limit: int = 1000) -> list[Memory]:
        return [m for m in self.memories if m.scope_key in scope_keys and m.superseded_by is None][:limit]


class History:
    def __init__(self) -> None:
        self.records: list[HistoryRecord] = []

    async def for_memory(self, memory_id: str, *, limit: int = 100) -> list[HistoryRecord]:
        return [r for r in self.records if r.memory_id == memory_id][-limit:]


async def retirements(memories: list[Memory], checker: Checker | None, days: float) -> list:
    return (await sweep_code(Store(memories), History(), checker, days, NOW, {})).retire  # type: ignore[arg-type]


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    root = tmp_path / "r"
    root.mkdir()
    for name in ("old_gone.py", "kept.py", "new_gone.py"):
        (root / name).write_text(f"# {name}\nx = 1\n")
    make_repo(root)
    first = commit_at(root, "first", NOW - timedelta(days=100))
    (root / "old_gone.py").unlink()
    deleting = commit_at(root, "delete old", NOW - timedelta(days=40))
    (root / "new_gone.py").unlink()
    commit_at(root, "delete new", NOW - timedelta(days=5))
    return root, first, deleting


async def test_a_memory_whose_every_file_is_long_gone_is_retired_audited_and_restorable(
    repo: tuple[Path, str, str], tmp_path: Path
) -> None:
    root, first, deleting = repo
    old = Citation(path="old_gone.py", repo=str(root), commit=first)
    kept = cite(root, "kept.py", first)
    new = Citation(path="new_gone.py", repo=str(root), commit=first)
    elsewhere = Citation(path="old_gone.py", repo=str(tmp_path / "not-here"), commit=first)
    long_ago = NOW - timedelta(days=60)
    memories = [
        memory("gone", [old], long_ago),
        memory("half", [old, kept], long_ago),  # one file still there
        memory("recent", [new], long_ago),  # deleted 5 days ago: not long enough
        memory("far", [old, elsewhere], long_ago),  # one repository not on this machine: unknown, kept
        memory("restated", [old], NOW - timedelta(days=1)),  # said again after its file went
    ]
    [op] = await retirements(memories, Checker(), 30)
    assert op.memory_id == "gone"
    assert op.superseded_by.startswith(FORGOTTEN_MARK)
    assert op.cause.startswith("aging:code-gone:") and f"old_gone.py deleted in {deleting[:7]}" in op.cause
    assert audit.store_outcome("superseded", op.cause) == "aged-out"
    # The same sweep again sends the same operation (idempotent); a shorter setting retires the recent one too.
    assert await retirements(memories, Checker(), 30) == [op]
    assert {o.memory_id for o in await retirements(memories, Checker(), 3)} == {"gone", "recent"}

    # Reversible: the console's restore brings it back, and the next sweep leaves it be.
    retired = msgspec.structs.replace(memories[0], superseded_by=op.superseded_by)
    assert actions.restorable(retired)
    back = actions.restore(retired, "still true of the new module", [0.0], by="me", now=NOW).memory
    assert back.superseded_by is None
    assert code_gone(back, Checker().check_all([old]), 30, NOW) is None


async def test_nothing_is_retired_where_the_work_trees_are_not_read_or_the_setting_is_zero(
    repo: tuple[Path, str, str],
) -> None:
    root, first, _ = repo
    memories = [memory("gone", [Citation(path="old_gone.py", repo=str(root), commit=first)], NOW - timedelta(days=60))]
    assert await retirements(memories, None, 30) == []
    assert await retirements(memories, Checker(), 0) == []
    assert Settings.from_env({}).code_gone_days == 30.0
    assert Settings.from_env({"MEMSTREAM_CHECK_CITATIONS": "false"}).check_citations is False


async def test_a_change_of_code_status_is_recorded_once_per_change_not_per_sweep(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    make_repo(root)
    first = commit_at(root, "first", NOW - timedelta(days=3))
    memories = [memory("m", [cite(root, "a.py", first)], NOW - timedelta(days=3))]
    store, history = Store(memories), History()
    seen: dict[str, str] = {}

    async def sweep(seen: dict[str, str]) -> list[str]:
        found = await sweep_code(store, history, Checker(), 30, NOW, seen)  # type: ignore[arg-type]
        history.records += found.records
        return [r.reason for r in found.records]

    assert await sweep(seen) == []  # current, as when it was cited: nothing to say
    (root / "a.py").write_text("x = 2\n")
    commit_at(root, "edit", NOW - timedelta(days=1))
    [changed] = await sweep(seen)
    assert changed.startswith("code changed (was current): a.py @ ")
    assert await sweep(seen) == []  # the same status again: no record
    assert await sweep({}) == []  # a restarted worker reads the last status from history
    (root / "a.py").unlink()
    commit_at(root, "delete", NOW - timedelta(hours=1))
    [gone] = await sweep(seen)
    assert gone.startswith("code gone (was changed): a.py @ ") and "deleted in" in gone
    assert [r.outcome for r in history.records] == ["code-status", "code-status"]
    assert len({r.record_id for r in history.records}) == 2

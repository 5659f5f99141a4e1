"""Phase 2's memory workspace on disk (the consolidation spec): per project and global, under the data dir.

    <data_dir>/memories/global/                 every selected rollout
    <data_dir>/memories/projects/<scope key>/   the selected rollouts of one project
        raw_memories.md        the raw memories, latest first
        rollout_summaries/     one file per retained rollout; stale files pruned
        consolidated.md        the consolidated summary of the last successful run

Every write replaces a file atomically and only when its content changed, so a run that
is interrupted and resumed leaves each file once, complete.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memstream.schemas import RolloutOutput

RAW_MEMORIES = "raw_memories.md"
SUMMARIES = "rollout_summaries"
CONSOLIDATED = "consolidated.md"


def root(data_dir: Path) -> Path:
    return data_dir / "memories"


def global_dir(data_dir: Path) -> Path:
    return root(data_dir) / "global"


def project_dir(data_dir: Path, scope_key: str) -> Path:
    return root(data_dir) / "projects" / scope_key


def summary_file_name(output: RolloutOutput) -> str:
    """Stable per rollout: its slug for people, a hash of its id for uniqueness."""
    digest = hashlib.sha256(output.rollout_id.encode()).hexdigest()[:10]
    return f"{output.slug or 'rollout'}-{digest}.md"


@dataclass(frozen=True)
class SyncResult:
    written: int
    pruned: int


def write_if_changed(path: Path, text: str) -> bool:
    """Atomically replace ``path`` with ``text`` unless it already holds it."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return True


def render_raw_memories(outputs: Sequence[RolloutOutput]) -> str:
    latest_first = sorted(outputs, key=lambda o: (o.source_updated_at, o.rollout_id), reverse=True)
    parts = ["# Raw memories (latest first)\n"]
    for output in latest_first:
        parts.append(
            f"## {output.slug or output.rollout_id}\n"
            f"rollout: {output.rollout_id} · project: {output.project or output.scope_key} · "
            f"updated: {output.source_updated_at.isoformat()}\n\n{output.raw_memory}\n"
        )
    return "\n".join(parts)


def render_summary(output: RolloutOutput) -> str:
    return (
        f"# {output.slug or output.rollout_id}\n\n"
        f"rollout: {output.rollout_id}\nproject: {output.project or output.scope_key}\n"
        f"updated: {output.source_updated_at.isoformat()}\nturns: {output.turns}\n\n"
        f"{output.rollout_summary}\n"
    )


def sync(directory: Path, outputs: Sequence[RolloutOutput]) -> SyncResult:
    """Make ``directory`` hold exactly ``outputs``: raw memories, one summary each, no stale file."""
    written = int(write_if_changed(directory / RAW_MEMORIES, render_raw_memories(outputs)))
    summaries = directory / SUMMARIES
    keep = {summary_file_name(o) for o in outputs}
    for output in outputs:
        written += write_if_changed(summaries / summary_file_name(output), render_summary(output))
    pruned = 0
    if summaries.exists():
        for stale in summaries.iterdir():
            if stale.name not in keep:
                stale.unlink()
                pruned += 1
    return SyncResult(written=written, pruned=pruned)


def write_consolidated(directory: Path, summary: str) -> bool:
    return write_if_changed(directory / CONSOLIDATED, summary.rstrip() + "\n")

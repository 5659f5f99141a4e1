"""What a replay reports as changed between the live and the shadow memories."""

from __future__ import annotations

import msgspec

from memstream.worker.replay import compare
from tests.unit.factories import memory


def test_added_removed_changed_and_unchanged() -> None:
    kept = memory("a", text="Tests run with pytest -q")
    gone = memory("b", text="Auth uses JWT cookies")
    retyped = memory("c", text="Deploys go through make ship", type="project-config")
    live = [kept, gone, retyped]
    new = memory("d", text="Auth uses Redis sessions")
    shadow = [kept, msgspec.structs.replace(retyped, type="tech-context"), new]
    added, removed, changed, unchanged = compare(live, shadow)
    assert [m.id for m in added] == ["d"]
    assert [m.id for m in removed] == ["b"]
    assert [(old.type, now.type) for old, now in changed] == [("project-config", "tech-context")]
    assert unchanged == 1


def test_a_newly_superseded_memory_counts_as_changed() -> None:
    live = [memory("a")]
    _, _, changed, unchanged = compare(live, [msgspec.structs.replace(live[0], superseded_by="z")])
    assert len(changed) == 1 and unchanged == 0

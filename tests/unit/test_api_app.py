"""The API app is built from an explicit context, without Faust (a query-only process serves it too)."""

from __future__ import annotations

import subprocess
import sys


def test_the_api_module_imports_no_faust_kafka_or_agents() -> None:
    heavy = ("faust", "aiokafka", "mode", "memstream.agents", "memstream.worker.app")
    code = f"import sys, memstream.front.app\nprint(' '.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_result_carries_what_a_caller_needs() -> None:
    from memstream.commands.read import format_hit
    from memstream.recall.answers import full_hit
    from memstream.schemas import Provenance
    from memstream.schemas.memory import HybridHit
    from tests.unit.factories import T0, memory

    stored = memory(
        "m1",
        "conversation",
        "[user] which port? [assistant] 6543",
        session_id="s1",
        sources=[Provenance(source_type="claude", session_id="s1", file="/h/s1.jsonl", line=12)],
    )
    shown = full_hit(HybridHit(stored, 0.81234, 0.9, None))
    assert {k: shown[k] for k in ("id", "text", "type", "scope", "score", "session")} == {
        "id": "m1",
        "text": "[user] which port? [assistant] 6543",
        "type": "conversation",
        "scope": "project",
        "score": 0.8123,
        "session": "s1",
    }
    assert shown["provenance"] == [{"source": "claude", "session": "s1", "at": "/h/s1.jsonl:12"}]
    assert shown["created_at"] == shown["updated_at"] == T0.isoformat().replace("+00:00", "Z")
    line = format_hit(shown)
    assert line.startswith("0.812  [conversation, project] [user] which port?")
    assert "id m1" in line and "session s1" in line and "from claude:/h/s1.jsonl:12" in line


def test_the_cli_says_what_became_of_the_code_a_result_cites() -> None:
    """`memstream search` prints each row's ``code`` (changed, moved, gone) where recall checked it, and
    nothing where the code is as it was or nothing was checked (issue 39)."""
    from memstream.commands.read import format_hit, format_row

    row = {"id": "m1", "type": "architecture", "scope": "project", "date": "2026-11-01", "score": 0.5, "preview": "p"}
    assert "code" not in format_row({**row, "code": ""})
    assert "(code changed)" in format_row({**row, "code": "changed"}).splitlines()[0]
    hit = {
        "id": "m1",
        "type": "architecture",
        "scope": "project",
        "text": "t",
        "score": 0.5,
        "created_at": "2026-11-01T00:00:00Z",
        "updated_at": "2026-11-01T00:00:00Z",
    }
    assert "code moved" in format_hit({**hit, "code": "moved"}) and "code" not in format_hit(hit).replace("created", "")

"""The code names the source documents by what they specify (docs/design.md), never by a number a
newcomer cannot look up."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NUMBERED = re.compile(r"\bseeds?\s+0{2}[0-4]\b", re.IGNORECASE)


def test_no_source_document_is_named_by_its_number() -> None:
    found = []
    for folder in ("memstream", "agents", "topics", "schemas", "bench", "docs"):
        for path in ROOT.joinpath(folder).rglob("*"):
            if path.suffix in (".py", ".md") and NUMBERED.search(path.read_text()):
                found.append(str(path.relative_to(ROOT)))
    assert not found, f"name the document by what it specifies (docs/design.md): {found}"


def test_the_check_sees_a_numbered_name() -> None:
    assert NUMBERED.search("the block's sections (seed 001)") and NUMBERED.search("Seeds\n 003 and")
    assert not NUMBERED.search("Pipeline v2's write gates")

"""bench/README.md indexes the workshop: every bench script has its row (issue 36, Build 3)."""

from __future__ import annotations

import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def scripts() -> list[str]:
    """Each module of bench/ that is a script (not a package's __init__, not the benchmarks' own tests)."""
    return sorted(
        str(path.relative_to(BENCH))
        for path in BENCH.rglob("*.py")
        if path.name != "__init__.py" and "tests" not in path.relative_to(BENCH).parts
    )


def listed() -> set[str]:
    """The scripts named in the first column of bench/README.md's tables."""
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([\w/]+\.py)` \|", readme, flags=re.M))


def test_every_bench_script_is_listed_in_the_index() -> None:
    assert len(scripts()) >= 30
    assert [script for script in scripts() if script not in listed()] == []


def test_the_index_lists_no_script_that_is_gone() -> None:
    assert sorted(listed() - set(scripts())) == []

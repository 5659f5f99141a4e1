"""The README's configuration table and commands match the code."""

from __future__ import annotations

import re
from pathlib import Path

from memstream.settings import settings_table

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_every_setting_is_documented_with_its_default() -> None:
    rows = dict(re.findall(r"^\| `([A-Z0-9_]+)` \| ([^|]+) \|", README, flags=re.MULTILINE))
    for variable, default, _ in settings_table():
        assert variable in rows, f"{variable} missing from the README's configuration table"
        shown = rows[variable].strip()
        assert shown == (f"`{default}`" if default else "(empty)"), f"{variable}: README says {shown}, code {default!r}"
    assert set(rows) == {variable for variable, _, _ in settings_table()}


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in README and "make up" in README
    assert "make test" in (ROOT / ".ci" / "run").read_text()

"""The README's two commands are the ones the Makefile and CI run."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in README and "make up" in README
    assert "make test" in (ROOT / ".ci" / "run").read_text()

"""bench.perf.baseline unpacks an old tree from the clone's history and measures it in a process of its own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.perf import baseline


def test_checkout_unpacks_the_tree_of_a_revision_and_removes_it_after() -> None:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=baseline.ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git clone")
    with baseline.checkout("HEAD") as tree:
        assert (tree / "pyproject.toml").is_file()
        assert (tree / "bench" / "perf" / "baseline.py").read_text() == Path(baseline.__file__).read_text()
    assert not tree.exists()


def test_an_unknown_revision_is_a_clear_error() -> None:
    with pytest.raises(baseline.BaselineError, match="cannot read no-such-rev-18"), baseline.checkout("no-such-rev-18"):
        pass


def test_a_failing_measurement_names_the_function_and_its_exit(tmp_path: Path) -> None:
    with pytest.raises(baseline.BaselineError, match=r"nothing-such in .* exited 1: .*unknown function"):
        baseline.run(tmp_path, "nothing-such")

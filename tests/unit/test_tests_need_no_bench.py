"""The test suite stands without the workshop: nothing under tests/ imports bench (issue 36, Build 3).

The fault-injection harness the tests share lives in tests/support; a benchmark's own checks live
beside it in bench/tests. A test may still run a bench as a subprocess (``python -m bench...``).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def bench_imports(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] == "bench"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "bench":
            found.append(node.module or "")
    return found


def test_the_check_sees_every_form_of_import() -> None:
    assert bench_imports("import bench.faults.chaos\nfrom bench import light\nfrom bench.perf.hops import PATH\n") == [
        "bench.faults.chaos",
        "bench",
        "bench.perf.hops",
    ]
    assert bench_imports("import benchmark\nfrom tests.support.chaos import ROOT\nx = 'from bench import y'\n") == []


def test_no_file_under_tests_imports_bench() -> None:
    offenders = {
        str(path.relative_to(TESTS)): found
        for path in sorted(TESTS.rglob("*.py"))
        if (found := bench_imports(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}

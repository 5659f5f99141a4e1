"""The API app is built from an explicit context, without Faust (a query-only process serves it too)."""

from __future__ import annotations

import subprocess
import sys


def test_the_api_module_imports_no_faust_kafka_or_agents() -> None:
    heavy = ("faust", "aiokafka", "mode", "memstream.agents", "memstream.app")
    code = f"import sys, memstream.api\nprint(' '.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""

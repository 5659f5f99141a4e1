"""Smoke test of the mem0 side-by-side benchmark: 2 sessions × 2 turns through mem0 on the fakes."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

# mem0 reads these on import (and creates MEM0_DIR, default ~/.mem0), so before importorskip imports it.
os.environ["MEM0_TELEMETRY"] = "False"
if "MEM0_DIR" not in os.environ:
    os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="mem0-test-home-")
    atexit.register(shutil.rmtree, os.environ["MEM0_DIR"], True)

pytest.importorskip("mem0")

from bench.compare.mem0_side_by_side import mem0_responder, run_mem0, synthetic_turns


def test_responder_answers_the_additive_extraction_prompt_with_one_fact() -> None:
    prompt = (
        "## Existing Memories\n[]\n\n## New Messages\nuser: question 1\nassistant: answer bench-turn 0.1 done\n\n"
        "## Observation Date\nx"
    )
    answer = mem0_responder(
        {"messages": [{"role": "system", "content": "Memory Extractor"}, {"role": "user", "content": prompt}]}
    )
    assert answer == (
        '{"memory": [{"id": "0", "text": "Fact recorded for bench-turn 0.1 in this project", '
        '"attributed_to": "assistant"}]}'
    )


async def test_run_mem0_adds_every_turn_with_positive_throughput() -> None:
    result = await run_mem0(synthetic_turns(2, 2), concurrency=2)

    assert result["turns"] == 4
    assert result["turns_per_s"] > 0
    assert result["p99_ms"] >= result["p50_ms"] > 0
    assert result["memories_stored"] == 4  # one distinct fact per turn
    assert result["llm_calls"] >= 4

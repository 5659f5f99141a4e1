"""A local model is one slow resource (issue 28): extraction runs one call at a time, the turns that arrive
meanwhile wait on the parked topic (not as failures), and every one is extracted in the end.

The model is the OpenAI fake answering as llama.cpp's server does, holding each answer to the schema it was
sent and writing its tokens slowly, so calls overlap in time unless the worker keeps them apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memstream.agents.extract import BUSY_REASON
from memstream.identity import project_key
from memstream.intake.publish import make_turn, publish
from memstream.rules import decision
from memstream.schemas import DeadLetter, ParkedSnapshot
from memstream.topics import DEAD_LETTERS, PARKED, topic_name
from tests.e2e.conftest import eventually, read_topic, read_whole, start_pipeline, values
from tests.fakes.openai_server import FakeOpenAI, requested_schema

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

SESSIONS = 5


def slow_model(body: dict[str, Any]) -> str:
    """One note per conversation, in the schema's shape when one was sent; the other stages' answers."""
    messages = body["messages"]
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    if system == decision.SYSTEM:
        return '{"action": "ADD", "targetId": "", "confidence": 0.9, "reason": "a new note"}'
    if requested_schema(body) is None:
        return '{"superseded": []}'
    last = [line for line in messages[-1]["content"].splitlines() if line.startswith("[assistant]")][-1]
    memory = {
        "memory": f"Note: {last.removeprefix('[assistant] ')}",
        "type": "learned-pattern",
        "confidence": 0.9,
        "scope": "project",
    }
    return json.dumps({"memories": [memory], "entities": []})


async def test_a_busy_local_model_queues_turns_on_the_parked_topic_and_extracts_them_all(tmp_path: Path) -> None:
    # ~20 tokens at 50 ms: each extraction streams for about a second.
    with FakeOpenAI(slow_model, server="llama.cpp", token_delay=0.05) as model:
        running = await start_pipeline(
            tmp_path / "data",
            local_llm_url=model.base_url,
            local_llm_model="qwen2.5-coder-1.5b",
            llm_primary="local",
            llm_retries=0,
            park_delay=0.2,
            park_delay_max=1.0,
        )
        try:
            for s in range(SESSIONS):
                project = str(tmp_path / f"p{s}")
                turns = [
                    make_turn(session_id=f"b{s}", project=project, role="user", content=f"How is part {s} built?"),
                    make_turn(
                        session_id=f"b{s}", project=project, role="assistant", content=f"Part {s} is built with make."
                    ),
                ]
                await publish(running.bootstrap, running.settings.topic_prefix, turns)

            async def extracted() -> bool:
                for s in range(SESSIONS):
                    stored = await running.providers.store.list([project_key(str(tmp_path / f"p{s}"))])
                    if not any(f"Note: Part {s} is built with make." in m.text for m in stored):
                        return False
                return True

            await eventually(extracted, what="every session's note extracted by the one local model")

            assert model.max_in_flight == 1
            parked = await read_topic(
                running.bootstrap,
                topic_name(running.settings.topic_prefix, PARKED),
                until=lambda records: len(records) >= 1,
            )
            waits = [v for v in values(parked) if isinstance(v, ParkedSnapshot)]
            assert waits and all(v.reason.startswith(BUSY_REASON) for v in waits)
            # Waiting is no failure: no attempt counted, no retry budget started.
            assert all(v.snapshot.attempt == 0 and v.snapshot.parked_since is None for v in waits)
            dead_letters = topic_name(running.settings.topic_prefix, DEAD_LETTERS)
            letters = (await read_whole(running.bootstrap, [dead_letters]))[dead_letters]
            assert [v for v in values(letters) if isinstance(v, DeadLetter)] == []
        finally:
            await running.stop()

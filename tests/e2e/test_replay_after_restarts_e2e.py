"""Replay on the embedded default reaches every turn ever accepted (issue 35.5): after two restarts of
`memstream up` (a Ctrl-C to its group, then kill -9 of its group, broker included) and a fresh start
of its broker (MEMSTREAM_BROKER_MAX_MB), the broker's turns topic holds only the last stretch, yet
`memstream replay` reproduces every live memory -- none added, removed or changed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.faults.test_startup import tansu_children
from tests.support.durable_up import Up, settle, verdict, workload

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


async def published_and_stored(up: Up, root: Path, round_: int, expected: list[str]) -> None:
    text, wanted = workload(root / "projects", sessions=6, exchanges=2, projects=2, seed=round_)
    text = text.replace('"session_id": "s', f'"session_id": "r{round_}s')  # new sessions each round
    turns = root / f"turns-{round_}.jsonl"
    turns.write_text(text)
    await asyncio.to_thread(up.publish, turns)
    expected += wanted
    texts = await settle(up, expected, timeout=300)
    assert verdict(expected, texts) == (0, 0, 0), f"round {round_}; see {up.log}"


async def broker_replaced(up: Up, first: int, timeout: float = 120) -> None:
    assert up.process is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        brokers = tansu_children(up.process.pid)
        if brokers and first not in brokers:
            return
        await asyncio.sleep(0.5)
    raise TimeoutError(f"the broker was not started afresh; see {up.log}")


@pytest.mark.timeout(900)
async def test_replay_after_two_restarts_and_a_broker_fresh_start_reproduces_every_memory(tmp_path: Path) -> None:
    up = Up(tmp_path / "data", tmp_path / "up.log")
    up.data_dir.mkdir()
    expected: list[str] = []
    try:
        up.start()
        await up.wait_ready()
        await published_and_stored(up, tmp_path, 0, expected)
        up.stop_as("sigint-group")  # restart 1
        up.start()
        await up.wait_ready()
        await published_and_stored(up, tmp_path, 1, expected)
        up.stop_as("kill-9-group")  # restart 2
        up.env["MEMSTREAM_BROKER_MAX_MB"] = "1"  # Tansu holds more than that from the start
        up.start()
        await up.wait_ready()
        assert up.process is not None
        [first] = tansu_children(up.process.pid)
        await published_and_stored(up, tmp_path, 2, expected)
        await broker_replaced(up, first)  # the fresh start
        up.stop_as("sigint-group")  # so that no other fresh start comes during the replay
        del up.env["MEMSTREAM_BROKER_MAX_MB"]
        up.start()
        await up.wait_ready()
        texts = await settle(up, expected, timeout=120)
        assert verdict(expected, texts) == (0, 0, 0)
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "memstream.cli", "replay", "--name", "again"],
            env={**up.env, "MEMSTREAM_HTTP_PORT": str(up.port)},
            cwd=tmp_path,
            capture_output=True,
            timeout=600,
        )
    finally:
        up.stop()
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    lines = out.splitlines()
    assert lines[0].startswith(f"replayed {2 * len(expected)} turns into "), out
    counts = {line.split(":")[0].strip(): int(line.split(":")[1]) for line in lines[1:5]}
    assert counts == {"added": 0, "removed": 0, "changed": 0, "unchanged": len(expected)}, out

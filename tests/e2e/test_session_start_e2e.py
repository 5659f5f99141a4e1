"""Claude Code starting a session: `memstream hook claude-code` run as its SessionStart hook, with
the documented JSON on stdin, against a running memstream and against none."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from memstream.kafka.broker import free_port
from memstream.worker import runner
from tests.e2e.conftest import start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def live(tmp_module_dir: Path) -> AsyncIterator[runner.Running]:
    running = await start_pipeline(tmp_module_dir / "data", user="dev@example.com")
    try:
        yield running
    finally:
        await running.stop()


async def hook(host: str, event: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The hook as a subprocess; awaited off the loop, which serves the API the hook calls."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "memstream.cli", "hook", host],
        input=json.dumps(event),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def environment(data_dir: Path, port: int) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")},
        "MEMSTREAM_DATA_DIR": str(data_dir),
        "MEMSTREAM_HTTP_PORT": str(port),
        "MEMSTREAM_USER": "dev@example.com",
        "PYTHONPATH": str(ROOT),
    }


def session_start(cwd: Path, source: str = "startup") -> dict[str, Any]:
    """Claude Code's SessionStart hook input (code.claude.com/docs/en/hooks#sessionstart)."""
    return {
        "session_id": "abc123",
        "transcript_path": str(cwd / "transcript.jsonl"),
        "cwd": str(cwd),
        "hook_event_name": "SessionStart",
        "source": source,
        "model": "claude-sonnet-4-6",
    }


def _remember(api_url: str, project: Path, text: str) -> None:
    body = json.dumps({"text": text, "project": str(project), "type": "project-brief"}).encode()
    request = urllib.request.Request(f"{api_url}/memories", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.loads(response.read())["status"] == "stored"


async def test_every_session_start_source_gets_the_project_block(live: runner.Running, tmp_path: Path) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    await asyncio.to_thread(
        _remember, live.settings.api_url, project, "The shop is a Django monolith serving the EU storefront"
    )
    env = environment(live.settings.data_dir, live.settings.http_port)
    for source in ("startup", "resume", "clear", "compact"):
        done = await hook("claude-code", session_start(project, source), env)
        assert done.returncode == 0, done.stderr
        output = json.loads(done.stdout)
        assert set(output) == {"hookSpecificOutput"}
        specific = output["hookSpecificOutput"]
        assert specific["hookEventName"] == "SessionStart"
        assert specific["additionalContext"].startswith("[MEMORY]\n## Project Brief")
        assert "Django monolith" in specific["additionalContext"]
    # Codex takes the same object (its parser refuses unknown fields); Gemini CLI reads additionalContext.
    for host in ("codex", "gemini"):
        done = await hook(host, session_start(project), env)
        assert set(json.loads(done.stdout)["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}


async def test_other_events_and_empty_projects_add_nothing(live: runner.Running, tmp_path: Path) -> None:
    env = environment(live.settings.data_dir, live.settings.http_port)
    assert (await hook("claude-code", {**session_start(tmp_path), "hook_event_name": "Stop"}, env)).stdout == ""
    empty = await hook("claude-code", session_start(tmp_path / "nothing-here"), env)
    assert (empty.returncode, empty.stdout) == (0, "")


async def test_with_memstream_down_the_session_starts_as_if_it_were_not_installed(tmp_path: Path) -> None:
    env = environment(tmp_path / "no-data", free_port())
    done = await hook("claude-code", session_start(tmp_path), env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    garbage = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "memstream.cli", "hook", "claude-code"],
        input="not json",
        env={**env, "MEMSTREAM_HTTP_PORT": "not-a-port"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (garbage.returncode, garbage.stdout) == (0, "")

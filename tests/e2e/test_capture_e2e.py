"""Capture end to end on the real embedded broker, store and embedder (raw mode): a folder of sessions
becomes memories whose search results name their file and line; a hook with memstream down spools, and
the spool is delivered when memstream is back. Claude Code's fixtures go through the real adapters; the
machinery's own cases use the test-only format of ``tests/unit/capture_fakes.py``."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from memstream.capture import hook
from memstream.capture.run import ingest
from memstream.capture.spool import drain, pending
from memstream.schemas import Turn
from memstream.settings import Settings
from memstream.topics import TURNS, topic_name
from tests.conftest import make_settings
from tests.e2e.conftest import eventually, read_topic, start_pipeline, values
from tests.unit.capture_fakes import FakeFormats, header, message

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="function")]

SHOP = "/work/shop"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "capture"


def write_session(path: Path, session: str, exchanges: list[tuple[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [header(session, SHOP)]
    for i, (question, answer) in enumerate(exchanges):
        lines += [message(2 * i, "user", question), message(2 * i + 1, "assistant", answer)]
    path.write_text("".join(lines))
    return path


def search(settings: Settings, query: str, project: str = SHOP) -> list[dict[str, Any]]:
    url = f"{settings.api_url}/search?" + urllib.parse.urlencode(
        {"q": query, "project": project, "limit": "10", "detail": "full"}
    )
    with urllib.request.urlopen(url, timeout=30) as response:
        return list(json.loads(response.read())["results"])


async def test_a_folder_of_sessions_becomes_memories_that_name_their_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    redis = write_session(
        folder / "a.jsonl",
        "sa",
        [("How do we keep sessions?", "Sessions now live in Redis with a 24h TTL, set in config/session.py.")],
    )
    write_session(
        folder / "b.jsonl",
        "sb",
        [("Which test runner?", "The suite runs with pytest -q; the e2e tests need the embedded broker.")],
    )
    running = await start_pipeline(tmp_path / "data")
    try:
        settings = running.settings
        out = io.StringIO()
        # ingest is the CLI's synchronous command: it runs in a thread beside the pipeline's loop.
        code = await asyncio.to_thread(
            ingest, settings, [folder], formats=FakeFormats(), bootstrap=running.bootstrap, out=out, err=io.StringIO()
        )
        assert code == 0, out.getvalue()
        assert "4 new, 4 published" in out.getvalue()
        records = await read_topic(
            running.bootstrap, topic_name(settings.topic_prefix, TURNS), until=lambda r: len(r) >= 4
        )
        turns = [t for t in values(records) if isinstance(t, Turn)]
        assert next(t.content for t in turns if t.session_id == "sa") == "How do we keep sessions?"
        assert turns[0].llm_source == "claude" and turns[0].hash and turns[0].provenance is not None

        hits = await eventually(
            lambda: _async(lambda: [h for h in search(settings, "where do sessions live?") if "Redis" in h["text"]]),
            what="the Redis memory in search",
        )
        assert {p["at"] for p in hits[0]["provenance"]} == {f"{redis}:2", f"{redis}:3"}

        # A second run publishes nothing.
        out = io.StringIO()
        await asyncio.to_thread(
            ingest, settings, [folder], formats=FakeFormats(), bootstrap=running.bootstrap, out=out, err=io.StringIO()
        )
        assert "0 new, 0 published" in out.getvalue()
    finally:
        await running.stop()


async def test_a_folder_of_claude_code_sessions_becomes_memories_that_name_their_file_and_line(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "claude"
    shutil.copytree(FIXTURES / "claude", folder)
    old = time.time() - 86_400  # a backlog: every file long finished
    for path in folder.glob("*.jsonl"):
        os.utime(path, (old, old))
    running = await start_pipeline(tmp_path / "data")
    try:
        out = io.StringIO()
        code = await asyncio.to_thread(
            ingest, running.settings, [folder], bootstrap=running.bootstrap, out=out, err=io.StringIO()
        )
        assert code == 0, out.getvalue()
        session = folder / "written_session.jsonl"

        def retry_hits() -> list[dict[str, Any]]:
            hits = search(running.settings, "why does the retry loop never stop?", project="/home/ada/src/orbit")
            return [h for h in hits if "attempts" in h["text"]]

        hits = await eventually(lambda: _async(retry_hits), what="the retry-loop memory")
        # Every reader's shape (API, `memstream search`, MCP): provenance with source, file and line.
        at = [p["at"].rpartition(":") for p in hits[0]["provenance"]]
        assert {(file, p["source"]) for (file, _, _), p in zip(at, hits[0]["provenance"], strict=True)} == {
            (str(session), "claude")
        }
        assert all(int(line) > 0 for _, _, line in at)
    finally:
        await running.stop()


async def test_a_hook_with_memstream_down_spools_and_the_spool_is_delivered_when_it_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    transcript = write_session(
        tmp_path / "claude" / "s1.jsonl", "s1", [("Deploy how?", "Deploys go through make ship.")]
    )
    payload = {"session_id": "s1", "transcript_path": str(transcript), "cwd": SHOP, "hook_event_name": "Stop"}
    down = make_settings(data)
    assert hook.capture("claude-code", payload, down, formats=FakeFormats()) == 2
    assert pending(down) == 2

    running = await start_pipeline(data, topic_prefix=down.topic_prefix)
    try:
        # The next hook call (nothing new in the file) finds memstream up and sends the spool.
        monkeypatch.setenv("MEMSTREAM_KAFKA_BOOTSTRAP", running.bootstrap)
        monkeypatch.setenv("MEMSTREAM_TOPIC_PREFIX", down.topic_prefix)
        # The pipeline serves in open mode (tests/conftest.py): the hook's flush writes as its open principal.
        monkeypatch.setenv("MEMSTREAM_API_OPEN", "true")
        monkeypatch.setenv("MEMSTREAM_USER", "dev@example.com")
        up = Settings.from_env(data_dir=data, topic_prefix=down.topic_prefix)
        with transcript.open("a") as handle:
            handle.write(message(2, "user", "And rollbacks?"))
        assert hook.capture("claude-code", payload, up, formats=FakeFormats()) == 1
        records = await read_topic(running.bootstrap, topic_name(down.topic_prefix, TURNS), until=lambda r: len(r) >= 3)
        assert [t.content for t in values(records)] == [
            "Deploy how?",
            "Deploys go through make ship.",
            "And rollbacks?",
        ]
        await eventually(lambda: _async(lambda: pending(up) == 0), what="an empty spool")
    finally:
        await running.stop()


async def test_memstream_up_sends_what_hooks_spooled_while_it_was_down(tmp_path: Path) -> None:
    data = tmp_path / "data"
    transcript = write_session(tmp_path / "s2.jsonl", "s2", [("Lint how?", "Run ruff check on the tree.")])
    down = make_settings(data)
    hook.capture(
        "claude-code", {"transcript_path": str(transcript), "hook_event_name": "Stop"}, down, formats=FakeFormats()
    )
    assert pending(down) == 2
    running = await start_pipeline(data, topic_prefix=down.topic_prefix)
    drainer = asyncio.create_task(drain(running.settings, running.bootstrap, interval=0.2))
    try:
        records = await read_topic(running.bootstrap, topic_name(down.topic_prefix, TURNS), until=lambda r: len(r) >= 2)
        assert [t.content for t in values(records)] == ["Lint how?", "Run ruff check on the tree."]
        await eventually(lambda: _async(lambda: pending(down) == 0), what="an empty spool")
    finally:
        drainer.cancel()
        await asyncio.gather(drainer, return_exceptions=True)
        await running.stop()


async def _async(check: Any) -> Any:
    return await asyncio.to_thread(check)

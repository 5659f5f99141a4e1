"""The README's quickstart, run as a newcomer would: `memstream up` in one process,
`publish`, `search` and `block` from others, Ctrl-C to stop — on the embedded default,
in raw mode (no LLM key)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstream.kafka.broker import free_port
from tests.support.group import GROUP_ENV

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "session.jsonl"
DEADLINE = 90.0


def cli(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memstream.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "ANTHROPIC_", "VOYAGE_"))}
    return {
        **clean,
        "MEMSTREAM_DATA_DIR": str(tmp_path / "data"),
        "MEMSTREAM_HTTP_PORT": str(free_port()),
        "MEMSTREAM_TOPIC_PREFIX": f"cli{uuid.uuid4().hex[:8]}",
        "MEMSTREAM_PARTITIONS": "2",
        **GROUP_ENV,
        "MEMSTREAM_USER": "dev@example.com",
        "PYTHONPATH": str(ROOT),
    }


@pytest.fixture
def up(env: dict[str, str], tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "memstream.cli", "up"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    banner: list[str] = []
    deadline = time.monotonic() + DEADLINE
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        banner.append(line.rstrip())
        if line.startswith("Press Ctrl-C"):
            break
    try:
        assert banner and banner[-1].startswith("Press Ctrl-C"), "\n".join(banner)
        yield process, banner
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_quickstart_publish_search_block_and_ctrl_c(
    up: tuple[subprocess.Popen[str], list[str]], env: dict[str, str], tmp_path: Path
) -> None:
    process, banner = up
    text = "\n".join(banner)
    assert "memstream is up in" in text and "Tansu (embedded" in text and "RAW MODE" in text

    published = cli(env, "publish", "--file", str(EXAMPLE), cwd=tmp_path)
    assert published.returncode == 0, published.stderr
    assert published.stdout.strip() == "published 8 turns to " + env["MEMSTREAM_TOPIC_PREFIX"] + ".turns"

    deadline = time.monotonic() + DEADLINE
    hits: list[dict[str, object]] = []
    while time.monotonic() < deadline and len(hits) < 5:
        result = cli(
            env, "search", "how do I run the tests", "--project", "demo-shop", "--json", "--full", cwd=tmp_path
        )
        assert result.returncode == 0, result.stderr
        hits = json.loads(result.stdout)["results"]
    # Four exchanges, one conversation memory each (raw mode), and the explicit
    # "Remember that I prefer bun…" as a user-scoped preference.
    assert sorted(str(hit["type"]) for hit in hits) == ["conversation"] * 4 + ["preference"]
    assert "uv run pytest -q" in str(hits[0]["text"])
    preference = next(hit for hit in hits if hit["type"] == "preference")
    assert preference["text"] == "I prefer bun over npm for all installs" and preference["scope"] == "user"
    assert all("hunter2" not in str(hit["text"]) for hit in hits)

    remembered = cli(
        env, "remember", "The staging database is restored nightly at 02:00", "--project", "demo-shop", cwd=tmp_path
    )
    assert remembered.returncode == 0, remembered.stderr
    assert (
        remembered.stdout.strip()
        == "remembered (tech-context, project scope): The staging database is restored nightly at 02:00"
    )
    deadline = time.monotonic() + DEADLINE
    found: list[dict[str, object]] = []
    while time.monotonic() < deadline and not found:
        result = cli(
            env, "search", "when is staging restored", "--project", "demo-shop", "--json", "--full", cwd=tmp_path
        )
        found = [h for h in json.loads(result.stdout)["results"] if "restored nightly" in str(h["text"])]
    assert found and found[0]["type"] == "tech-context"

    block = cli(env, "block", "--project", "demo-shop", cwd=tmp_path)
    assert block.returncode == 0, block.stderr
    assert block.stdout.startswith("[MEMORY]\n## Tech Context\n- The staging database is restored nightly at 02:00\n")
    assert "\n## Last Session\n- [user] " in block.stdout
    assert "## User Preferences\n- I prefer bun over npm for all installs" in block.stdout

    # One memory forgotten from the CLI (issue 37.8), as MCP, HTTP and the console can: gone from search.
    memory_id = str(found[0]["id"])
    unreasoned = cli(env, "forget", memory_id, cwd=tmp_path)
    assert unreasoned.returncode == 2 and "--reason" in unreasoned.stderr
    forgotten = cli(env, "forget", memory_id, "--reason", "staging moved to hourly restores", cwd=tmp_path)
    assert forgotten.returncode == 0, forgotten.stderr
    assert forgotten.stdout.startswith(f"forgot memory {memory_id} (staging moved to hourly restores)")
    result = cli(env, "search", "when is staging restored", "--project", "demo-shop", "--json", "--full", cwd=tmp_path)
    assert not [h for h in json.loads(result.stdout)["results"] if h["id"] == memory_id]
    again = cli(env, "forget", memory_id, "--reason", "twice", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.strip() == f"memory {memory_id} was already forgotten"
    nobody = str(uuid.uuid4())
    unknown = cli(env, "forget", nobody, "--reason", "no such memory", cwd=tmp_path)
    assert unknown.returncode == 2 and f"no memory {nobody}" in unknown.stderr, unknown.stderr

    runtime = json.loads((Path(env["MEMSTREAM_DATA_DIR"]) / "runtime.json").read_text())
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == 0
    assert not (Path(env["MEMSTREAM_DATA_DIR"]) / "runtime.json").exists()
    host, port = runtime["bootstrap"].split(":")
    from memstream.kafka.broker import metadata_ready

    assert not metadata_ready(host, int(port)), "the embedded broker outlived memstream"


def test_bad_input_is_rejected_before_anything_is_sent(env: dict[str, str], tmp_path: Path) -> None:
    # No memstream is running: a rejection here proves validation happens before connecting.
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"session_id": "s", "project": "p", "role": "user", "content": "ok"}\n'
        '{"session_id": "s", "project": "p", "role": "robot", "content": "hi"}\n'
    )
    result = cli(env, "publish", "--file", str(bad), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"memstream: {bad} line 2: unknown role 'robot' (expected one of: user, assistant, system, tool)"
    )

    bad.write_text('{"session_id": "s", "project": "p", "role": "user", "content": "ok"}\n{not json\n')
    result = cli(env, "publish", "--file", str(bad), cwd=tmp_path)
    assert result.returncode == 2 and f"{bad} line 2:" in result.stderr and len(result.stderr.strip().splitlines()) == 1

    result = cli(env, "publish", "--session", "s", "--role", "user", "   ", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip() == "memstream: content is empty"

    result = cli(env, "publish", "--session", "s", "hello", cwd=tmp_path)
    assert result.returncode == 2 and "memstream is not running" in result.stderr

"""``memstream search``, ``timeline`` and ``get`` against a fake API on loopback (issue 25): the compact
index by default, the score named, full records on request; and every verb quiet on a closed pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import pytest

from memstream.cli import main
from memstream.kafka.broker import free_port

ROOT = Path(__file__).resolve().parents[2]
FIELDS = ["id", "type", "scope", "date", "session", "score", "preview"]
ROW = ["m1", "conversation", "project", "2026-11-01", "s1", 0.912, "[user] which port? [assistant] 6543"]
RECORD = {
    "id": "m1",
    "text": "[user] which port? [assistant] 6543",
    "type": "conversation",
    "scope": "project",
    "session": "s1",
    "provenance": [{"source": "claude", "session": "s1", "at": "/h/s1.jsonl:12"}],
    "created_at": "2026-11-01T09:00:00Z",
    "updated_at": "2026-11-01T09:00:00Z",
}


class FakeApi(BaseHTTPRequestHandler):
    asked: ClassVar[list[tuple[str, dict[str, list[str]]]]] = []

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        self.asked.append((url.path, query))
        if url.path == "/search" and query.get("detail") == ["full"]:
            body: dict[str, Any] = {"query": "q", "score": "fused", "results": [{**RECORD, "score": 0.912}]}
        elif url.path == "/search":
            body = {"score": "fused", "fields": FIELDS, "hits": [ROW] * int(query["limit"][0])}
        elif url.path == "/timeline":
            body = {"fields": [*FIELDS[:5], "preview"], "anchor": "m1", "memories": [[*ROW[:5], ROW[6]]]}
        else:
            body = {"memories": [RECORD], "missing": [i for i in query["ids"][0].split(",") if i != "m1"]}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name in [n for n in os.environ if n.startswith("MEMSTREAM_")]:
        monkeypatch.delenv(name)
    values = {"MEMSTREAM_DATA_DIR": str(tmp_path / "data"), "MEMSTREAM_HTTP_PORT": str(free_port())}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def api(env: dict[str, str]) -> Iterator[type[FakeApi]]:
    server = ThreadingHTTPServer(("127.0.0.1", int(env["MEMSTREAM_HTTP_PORT"])), FakeApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeApi.asked = []
    try:
        yield FakeApi
    finally:
        server.shutdown()
        server.server_close()


def test_search_prints_the_index_with_its_score_named(api: type[FakeApi], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "which port", "-n", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("score: fused (")
    assert lines[1] == "0.912  m1  [conversation, project]  2026-11-01  session s1"
    assert lines[2] == "    [user] which port? [assistant] 6543"
    assert api.asked[0][1]["detail"] == ["index"]


def test_search_full_and_get_print_records_with_file_and_line(
    api: type[FakeApi], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "which port", "--full"]) == 0
    full = capsys.readouterr().out
    assert "0.912  [conversation, project] [user] which port?" in full and "from claude:/h/s1.jsonl:12" in full
    assert main(["get", "m1", "nope"]) == 1  # one id named no memory
    out, err = capsys.readouterr()
    assert "from claude:/h/s1.jsonl:12" in out and err.strip() == "memstream: no memory nope"
    assert api.asked[-1] == ("/memories", {"ids": ["m1,nope"]})


def test_timeline_marks_its_anchor(api: type[FakeApi], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", "m1", "--before", "2"]) == 0
    assert capsys.readouterr().out.startswith("> m1  [conversation, project]  2026-11-01  session s1")
    assert api.asked[0][1]["before"] == ["2"] and api.asked[0][1]["id"] == ["m1"]


def closed_pipe(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``memstream args`` with its standard output closed before it writes, as ``| head`` leaves it."""
    child = subprocess.Popen(
        [sys.executable, "-m", "memstream.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader is gone before the first line
    err = child.stderr.read()
    return subprocess.CompletedProcess(args, child.wait(timeout=60), "", err)


def test_search_into_a_closed_pipe_exits_0_quietly(api: type[FakeApi], env: dict[str, str], tmp_path: Path) -> None:
    done = closed_pipe(["search", "which port", "-n", "100"], env, tmp_path)
    assert (done.returncode, done.stderr) == (0, "")


def test_install_dry_run_into_a_closed_pipe_exits_0_quietly(env: dict[str, str], tmp_path: Path) -> None:
    # A project install refuses a `memstream` that is not on PATH (issue 37.7): here it is, as after an install.
    on_path = {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = closed_pipe(["install", "claude-code", "--dry-run", "--project", str(tmp_path)], on_path, tmp_path)
    assert (done.returncode, done.stderr) == (0, "")

"""`memstream token` and the CLI's publishing rules, without a running server."""

from __future__ import annotations

import io
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from memstream.auth import TokenStore
from memstream.cli import main
from memstream.kafka.broker import free_port


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in [n for n in os.environ if n.startswith("MEMSTREAM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEMSTREAM_KAFKA_BOOTSTRAP", "127.0.0.1:1")  # never reached: refusals come first
    return tmp_path / "data"


def test_create_list_revoke(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "create", "--user", "alice@example.com", "-p", "/repos/a", "--label", "alice"]) == 0
    token = capsys.readouterr().out.strip()
    store = TokenStore(data_dir / "tokens.json")
    assert store.authenticate(token).user == "alice@example.com"
    assert main(["token", "list"]) == 0
    listed = capsys.readouterr().out
    assert "alice@example.com on 1 project(s)" in listed and "active" in listed and token not in listed
    token_id = store.records()[0].id
    assert main(["token", "revoke", token_id]) == 0
    assert main(["token", "list"]) == 0 and "revoked" in capsys.readouterr().out
    assert main(["token", "revoke", "nope"]) == 2


def test_create_refuses_a_user_without_projects_and_a_mixed_admin(data_dir: Path) -> None:
    assert main(["token", "create", "--user", "bob@example.com"]) == 2
    assert main(["token", "create", "-p", "/repos/a"]) == 2
    assert main(["token", "create", "--admin"]) == 0


def publish_as(token: str, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setenv("MEMSTREAM_TOKEN", token)
    return main(["publish", "hello there", "--session", "s1", "-r", "user", *args])


def test_publish_refuses_another_user_and_another_project(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["token", "create", "--user", "alice@example.com", "-p", "/repos/a"]) == 0
    token = capsys.readouterr().out.strip()
    assert publish_as(token, monkeypatch, "-p", "/repos/a", "--user", "bob@example.com") == 2
    assert "another user" in capsys.readouterr().err
    assert publish_as(token, monkeypatch, "-p", "/repos/b") == 2
    assert "project" in capsys.readouterr().err
    assert publish_as(token + "x", monkeypatch, "-p", "/repos/a") == 2
    assert "not a valid token" in capsys.readouterr().err


def test_every_writing_verb_without_a_token_refuses_in_one_line(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`memstream publish --user alice` with no token used to go straight to Kafka, into alice's scope."""
    monkeypatch.delenv("MEMSTREAM_TOKEN", raising=False)
    (tmp_path / "README.md").write_text("# a project\n")
    for argv in (
        ["publish", "I prefer tabs", "--session", "s1", "--user", "alice@example.com", "-p", "/repos/a"],
        ["remember", "The build uses make", "--project", "/repos/a"],
        ["init", str(tmp_path)],
        ["ingest", str(tmp_path)],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("memstream: refused: writing needs a token") and "\n" not in err, (argv, err)


def test_capture_needs_a_token_for_every_project(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["token", "create", "--user", "alice@example.com", "-p", "/repos/a"]) == 0
    monkeypatch.setenv("MEMSTREAM_TOKEN", capsys.readouterr().out.strip())
    assert main(["ingest", str(tmp_path)]) == 2
    assert "needs a token for all projects" in capsys.readouterr().err


# -- memstream forget: the admin API, with the CLI's token ------------------------------------


class FakeForgetApi(BaseHTTPRequestHandler):
    asked: ClassVar[list[tuple[str, str, dict[str, str]]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.asked.append((self.path, self.headers.get("Authorization", ""), body))
        reply = json.dumps({"scope": "user", "scope_key": "u_0123456789abcdef", "forgotten_at": "now"}).encode()
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


def test_forget_asks_the_admin_api_with_the_token_after_confirmation(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    monkeypatch.setenv("MEMSTREAM_HTTP_PORT", str(port))
    monkeypatch.setenv("MEMSTREAM_TOKEN", "mst_0123456789ab_admin")
    server = ThreadingHTTPServer(("127.0.0.1", port), FakeForgetApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setattr("sys.stdin", io.StringIO(""))
        assert main(["forget", "--user", "bob@example.com"]) == 2, "no terminal to confirm on: --yes is required"
        assert FakeForgetApi.asked == []
        assert main(["forget", "--user", "bob@example.com", "--yes"]) == 0
        assert main(["forget", "--project", "/repos/b", "--yes"]) == 0
    finally:
        server.shutdown()
        server.server_close()
    assert FakeForgetApi.asked == [
        ("/admin/forget", "Bearer mst_0123456789ab_admin", {"user": "bob@example.com"}),
        ("/admin/forget", "Bearer mst_0123456789ab_admin", {"project": "/repos/b"}),
    ]
    assert "the pipeline is purging it" in capsys.readouterr().out

"""`memstream doc` and `memstream doctor` call the API as this machine's user, with its bearer token.

Every API route but /health wants a token (issue 16); these verbs once sent none and got 401.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memstream.cli import main

TOKEN = "mst_0123456789ab_" + "s" * 43


class _Api(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str]] = []  # noqa: RUF012 - the test reads what the handler saw

    def _answer(self) -> None:
        self.seen.append((self.command, self.path, self.headers.get("Authorization", "")))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.send_response(401)
            body = json.dumps({"error": "missing or invalid bearer token"}).encode()
        else:
            self.send_response(200)
            if self.path.startswith("/maintenance"):
                body = json.dumps({"error": "unused"}).encode()
            else:
                body = json.dumps({"documents": []}).encode()
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    do_GET = _answer
    do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[tuple[str, str, str]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Api.seen = []
    for name in [n for n in os.environ if n.startswith("MEMSTREAM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEMSTREAM_HTTP_PORT", str(server.server_address[1]))
    monkeypatch.setenv("MEMSTREAM_TOKEN", TOKEN)
    try:
        yield _Api.seen
    finally:
        server.shutdown()
        server.server_close()


def test_doc_list_sends_the_bearer_token(api: list[tuple[str, str, str]], tmp_path: Path) -> None:
    assert main(["doc", "list", "--project", str(tmp_path)]) == 0
    assert [(method, auth) for method, _, auth in api] == [("GET", f"Bearer {TOKEN}")]


def test_doctor_sends_the_bearer_token(api: list[tuple[str, str, str]], capsys: pytest.CaptureFixture[str]) -> None:
    main(["doctor", "--json"])
    assert api and all(auth == f"Bearer {TOKEN}" for _, _, auth in api)

"""``memstream history``: one line per audit record, and its errors, against a fake API on loopback."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import msgspec
import pytest

from memstream.cli import main
from memstream.commands.read import format_record
from memstream.kafka.broker import free_port
from memstream.schemas.history import HistoryRecord

MEMORY = "6f1c1a2e-0000-5000-8000-000000000001"
SUCCESSOR = "6f1c1a2e-0000-5000-8000-000000000002"
TS = datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def as_api(record: HistoryRecord) -> dict[str, Any]:
    """A record as GET /history returns it."""
    return json.loads(json.dumps(msgspec.to_builtins(record)))


def test_a_decision_shows_its_model_prompt_and_review_flag() -> None:
    record = HistoryRecord(
        record_id="r1",
        memory_id=MEMORY,
        scope_key="p_alpha",
        outcome="updated",
        action="UPDATE",
        target_id=SUCCESSOR,
        reason="newer version stated",
        review_needed=True,
        model="claude-haiku-4-5",
        prompt_version="decide-v2",
        ts=TS,
    )
    assert format_record(as_api(record)) == (
        f"2025-03-04T05:06:07Z  updated     UPDATE  {MEMORY} -> {SUCCESSOR}  newer version stated"
        "  claude-haiku-4-5 (decide-v2)  REVIEW NEEDED"
    )


def test_a_purge_has_no_action_model_or_flag() -> None:
    record = HistoryRecord(
        record_id="r2",
        memory_id=MEMORY,
        scope_key="p_alpha",
        outcome="purged",
        target_id=SUCCESSOR,
        reason="retention: tombstone older than 30 days",
        ts=TS,
    )
    assert format_record(as_api(record)) == (
        f"2025-03-04T05:06:07Z  purged      -       {MEMORY} -> {SUCCESSOR}  retention: tombstone older than 30 days  -"
    )


def test_empty_fields_are_dashes_and_times_are_utc() -> None:
    line = format_record({"ts": "2025-03-04T07:06:07+02:00", "outcome": "skipped", "memory_id": ""})
    assert line == "2025-03-04T05:06:07Z  skipped     -       -  -  -"


# -- the command against an API ------------------------------------------------------


class FakeApi(BaseHTTPRequestHandler):
    """GET /history as ``memstream up`` serves it, over canned records."""

    #: The server builds a handler per request, so state lives on the class; the api fixture resets it.
    records: ClassVar[dict[str, list[dict[str, Any]]]] = {}
    asked: ClassVar[list[dict[str, list[str]]]] = []

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        self.asked.append(query)
        if url.path != "/history" or "memory_id" not in query:
            self._reply(400, {"error": "one of the 'memory_id', 'scope' or 'project' parameters is required"})
            return
        memory_id = query["memory_id"][0]
        self._reply(200, {"memory_id": memory_id, "records": self.records.get(memory_id, [])})

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """The developer's MEMSTREAM_ settings out of the way; returns the API port to use."""
    for name in [n for n in os.environ if n.startswith("MEMSTREAM_")]:
        monkeypatch.delenv(name)
    port = free_port()
    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEMSTREAM_HTTP_PORT", str(port))
    return port


@pytest.fixture
def api(env: int) -> Iterator[type[FakeApi]]:
    server = ThreadingHTTPServer(("127.0.0.1", env), FakeApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeApi.records, FakeApi.asked = {}, []
    try:
        yield FakeApi
    finally:
        server.shutdown()
        server.server_close()


def test_prints_one_line_per_record_oldest_first(api: type[FakeApi], capsys: pytest.CaptureFixture[str]) -> None:
    created = HistoryRecord(record_id="a", memory_id=MEMORY, scope_key="p", outcome="created", action="ADD", ts=TS)
    purged = msgspec.structs.replace(created, record_id="b", outcome="purged", action="", ts=TS.replace(day=5))
    api.records[MEMORY] = [as_api(created), as_api(purged)]

    assert main(["history", MEMORY, "--limit", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [format_record(as_api(created)), format_record(as_api(purged))]
    assert api.asked == [{"memory_id": [MEMORY], "limit": ["5"]}]


def test_json_prints_what_the_api_returned(api: type[FakeApi], capsys: pytest.CaptureFixture[str]) -> None:
    record = as_api(HistoryRecord(record_id="a", memory_id=MEMORY, scope_key="p", outcome="created", ts=TS))
    api.records[MEMORY] = [record]
    assert main(["history", MEMORY, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"memory_id": MEMORY, "records": [record]}


def test_a_memory_without_history_is_an_error(api: type[FakeApi], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "no-such-memory"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == "memstream: no history for memory no-such-memory\n"


def test_nothing_running_is_an_error(env: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", MEMORY]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"memstream: cannot reach memstream at http://127.0.0.1:{env} (")
    assert err.endswith("is `memstream up` running?\n") and err.count("\n") == 1


def test_a_bad_limit_is_refused_before_asking(env: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", MEMORY, "--limit", "0"]) == 2
    assert capsys.readouterr().err == "memstream: --limit must be 1 or more\n"

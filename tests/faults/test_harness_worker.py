"""The fault harness's worker is up only when its own process answers.

A held-output run in CI stored nothing for 180 s after its restart: the worker it started
again on the same HTTP port could not bind it (another test's process had taken the port
freed by the kill), exited, and the harness read that other process's ``/health`` and
``/memories`` as its own. A foreign process answering on the port must not pass for the
worker, and a worker that lost its port starts again on another.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tests.support.chaos import Worker, external_broker, worker_env

pytestmark = [pytest.mark.e2e]


class _Impostor(BaseHTTPRequestHandler):
    """Answers every GET as a ready worker with no memories would."""

    def do_GET(self) -> None:
        body = json.dumps({"status": "ok", "ready": True, "memories": []}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def impostor_port() -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), _Impostor)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.asyncio
async def test_a_worker_whose_port_another_process_holds_starts_again_on_its_own(
    tmp_path: Path, impostor_port: int
) -> None:
    with external_broker() as broker:
        prefix = f"port{uuid.uuid4().hex[:8]}"
        worker = Worker(worker_env(broker.bootstrap, prefix), tmp_path / "data", tmp_path / "w.log")
        worker.start(port=impostor_port)
        try:
            await worker.wait_up(timeout=90)
            assert worker.port != impostor_port
            assert worker.ready()  # this process wrote itself ready
            health = worker.get("/health")
            assert health is not None and "embedding_model" in health  # a worker's answer, not the impostor's
            assert await worker.memory_texts() == []
        finally:
            worker.stop()
    assert "address already in use" in (tmp_path / "w.log").read_text().lower()


def test_an_answer_on_the_port_of_an_exited_worker_does_not_count(tmp_path: Path, impostor_port: int) -> None:
    worker = Worker({}, tmp_path / "data", tmp_path / "w.log")
    worker.port = impostor_port
    worker.process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(2)"])
    worker.process.wait()
    with pytest.raises(RuntimeError, match="worker exited with 2"):
        asyncio.run(worker.memory_texts())
    with pytest.raises(RuntimeError, match="worker exited with 2"):
        asyncio.run(worker.wait_up(timeout=10))

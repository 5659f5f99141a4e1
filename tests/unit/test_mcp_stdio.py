"""``memstream mcp``'s handshake (issue 25): answered before the MCP SDK is imported, exactly as the SDK's
own server answers it, once; then the SDK serves everything after it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from memstream import __version__
from memstream.serve.mcp_stdio import HANDSHAKE_VERSIONS, handshake, initialize_result

ROOT = Path(__file__).resolve().parents[2]


def request(id: int, method: str, **params: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).encode() + b"\n"


def test_the_handshake_imports_no_sdk() -> None:
    code = (
        "import sys, memstream.cli, memstream.commands.agent, memstream.serve.mcp_stdio\n"
        "print(' '.join(m for m in ('mcp', 'mcp_types', 'pydantic', 'httpx', 'anyio', 'importlib.metadata')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_version_is_the_packages() -> None:
    assert __version__ == version("memstream")


def test_the_static_answer_is_the_sdks(tmp_path: Path) -> None:
    """The SDK's own stdio server, asked the same: the early answer must be its answer, word for word."""
    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    sdk = (
        "from memstream.serve.mcp_server import stdio_main\n"
        "stdio_main('http://127.0.0.1:9', 'dev@example.com', '/p')\n"  # no ``first``: the SDK reads stdin itself
    )
    for asked in ("2025-06-18", "2099-01-01"):
        params = {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        answered = subprocess.run(
            [sys.executable, "-c", sdk],
            input=request(1, "initialize", **params),
            capture_output=True,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=60,
        )
        assert json.loads(answered.stdout.splitlines()[0])["result"] == initialize_result(params), asked
    for asked in HANDSHAKE_VERSIONS:
        assert initialize_result({"protocolVersion": asked})["protocolVersion"] == asked


def test_only_an_initialize_request_is_answered_early() -> None:
    out = io.BytesIO()
    _, answered = handshake(io.BytesIO(request(7, "initialize", protocolVersion="2025-06-18")), out)
    assert answered == 7 and json.loads(out.getvalue())["result"]["serverInfo"]["name"] == "memstream"
    quiet = io.BytesIO()
    assert handshake(io.BytesIO(request(1, "tools/list")), quiet) == (request(1, "tools/list"), None)
    assert handshake(io.BytesIO(b"not json\n"), quiet)[1] is None and quiet.getvalue() == b""


def test_over_stdio_the_handshake_is_answered_once_then_the_sdk_serves(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    env.update({"PYTHONPATH": str(ROOT), "MEMSTREAM_DATA_DIR": str(tmp_path), "MEMSTREAM_USER": "dev@example.com"})
    child = subprocess.Popen(
        [sys.executable, "-m", "memstream.cli", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(
        request(
            1, "initialize", protocolVersion="2025-06-18", capabilities={}, clientInfo={"name": "t", "version": "0"}
        )
    )
    child.stdin.flush()
    first = json.loads(child.stdout.readline())
    child.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n' + request(2, "tools/list"))
    child.stdin.flush()
    # The SDK's own answer to the replayed initialize is dropped: the next message answers tools/list.
    second = json.loads(child.stdout.readline())
    # Closed only now, as a client shuts a stdio server down: at the end of its input the SDK cancels
    # the requests still in flight (mcp's JSONRPCDispatcher.run), so one sent just before may go unanswered.
    child.stdin.close()
    rest = child.stdout.read().splitlines()
    assert child.wait(timeout=60) == 0
    assert first["id"] == 1 and first["result"]["protocolVersion"] == "2025-06-18"
    assert second["id"] == 2 and rest == []
    assert "search_memories" in {tool["name"] for tool in second["result"]["tools"]}

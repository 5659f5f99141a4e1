"""``memstream mcp`` over stdio: the ``initialize`` handshake answered before the MCP SDK is imported.

A coding CLI starts the server and waits for its answer to ``initialize``; importing the ``mcp``
package alone took 0.8-1.4 s on a loaded 2-core machine, so the server answered in 1.3-4 s. The
handshake's answer is static (the server's name, version, capabilities and instructions), so this
module, which imports nothing but the standard library, reads the first request and answers it
before it imports the SDK. The SDK's server is then handed the same request first
(it must see the handshake to know the client's capabilities, roots among them), its own answer to
it is dropped, and it serves every request after. tests/unit/test_mcp_stdio.py holds the answer
here equal to the SDK's for every protocol version.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import IO, Any

NAME = "memstream"
INSTRUCTIONS = (
    "memstream is the long-term memory of this project and user. Call get_memory_block at the start of "
    "a task for the project's context. Before answering questions about past work, decisions, preferences "
    "or errors: search_memories first (a compact index of ids and one-line previews), timeline to follow a "
    "thread around a hit, then get_memories for only the ids you need. add_memory when the user asks to "
    "remember something; add_document for a web page or text the project should know."
)
#: The protocol versions the SDK negotiates through ``initialize`` (mcp_types.HANDSHAKE_PROTOCOL_VERSIONS),
#: oldest first; a client asking for another gets the newest.
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: What the SDK's server declares for memstream's tools-only server.
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}


def package_version() -> str:
    """memstream's version, as the server tells clients in ``serverInfo``."""
    from memstream import __version__

    return __version__


def initialize_result(params: Any) -> dict[str, Any]:
    """The answer to ``initialize``, as the SDK's server gives it."""
    asked = params.get("protocolVersion") if isinstance(params, dict) else None
    return {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
        "serverInfo": {"name": NAME, "version": package_version()},
    }


def handshake(stdin: IO[bytes], stdout: IO[bytes]) -> tuple[bytes, Any]:
    """Read the first message; answer it if it is ``initialize``. Returns the line read (for the SDK to
    see first) and the id answered (None: nothing was, the SDK answers everything)."""
    first = stdin.readline()
    try:
        message = json.loads(first)
    except ValueError:
        return first, None
    if not isinstance(message, dict) or message.get("method") != "initialize" or "id" not in message:
        return first, None
    answer = {"jsonrpc": "2.0", "id": message["id"], "result": initialize_result(message.get("params"))}
    stdout.write(json.dumps(answer, separators=(",", ":")).encode() + b"\n")
    stdout.flush()
    return first, message["id"]


def main(serve: Callable[[bytes, Any], None]) -> None:
    """``memstream mcp``: answer the handshake, then ``serve(first, answered)`` with the SDK.

    Everything else waits for the handshake's answer: the settings, the identity (it may run git),
    the token and the SDK's import, which holds the GIL (a thread importing it meanwhile made the
    answer slower, not faster: bench/read/mcp_startup.py)."""
    first, answered = handshake(sys.stdin.buffer, sys.stdout.buffer)
    serve(first, answered)

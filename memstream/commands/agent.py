"""The verbs coding agents run: hook (their session hooks) and mcp (MCP over stdio). Both stay off
the pipeline's imports: a hook runs at every session start, and the MCP server calls the API."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memstream.settings import Settings

# --- hook ----------------------------------------------------------------------------


def cmd_hook(args: argparse.Namespace, settings: Settings) -> int:
    """Never fails the agent: unreadable input or a memstream that is down prints nothing, exit 0."""
    try:
        payload = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        return 0
    if not isinstance(payload, dict):
        return 0
    if payload.get("hook_event_name") == "SessionStart":
        from memstream.session_start import hook_output

        output = hook_output(args.host, payload, settings)
        if output:
            print(output)
    return 0


# --- mcp -----------------------------------------------------------------------------


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.mcp_server import stdio_main
    from memstream.runtime import api_url, user_identity

    stdio_main(api_url(settings), user_identity(settings), str(Path.cwd()))
    return 0

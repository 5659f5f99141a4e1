"""The verbs coding agents run: hook (their session hooks) and mcp (MCP over stdio). Both stay off
the pipeline's imports: a hook runs at every session start, and the MCP server calls the API."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

from memstream.settings import Settings

# --- hook ----------------------------------------------------------------------------


def cmd_hook(args: argparse.Namespace, settings: Settings) -> int:
    """Never fails the agent: unreadable input or a memstream that is down prints nothing, exit 0.

    The same dispatcher the ``memstream`` console script reaches directly (:mod:`memstream.hooks`):
    SessionStart prints the [MEMORY] block, every other event captures the session's new turns."""
    from memstream.hooks import main as hook_main

    argv = [args.host, *(["--data-dir", args.data_dir] if getattr(args, "data_dir", None) else [])]
    return hook_main([*argv, *getattr(args, "payload", [])])


# --- mcp -----------------------------------------------------------------------------


def cmd_mcp(args: argparse.Namespace | None = None, settings: Settings | None = None) -> int:
    """``memstream mcp``: the handshake answered first (memstream.serve.mcp_stdio), then the settings."""
    from memstream.serve.mcp_stdio import main

    def serve(first: bytes, answered: object) -> None:
        from memstream.runtime import api_url, auth_headers, user_identity
        from memstream.serve.mcp_server import stdio_main

        chosen = settings or Settings.from_env()
        if getattr(args, "host", None) and not os.environ.get("MEMSTREAM_DATA_DIR"):
            # A committed project file runs `memstream mcp --host HOST`: no path of this machine in it.
            from memstream.capture.install_record import installed_data_dir

            installed = installed_data_dir(args.host)  # type: ignore[union-attr]
            if installed is not None:
                chosen = dataclasses.replace(chosen, data_dir=installed)
        stdio_main(
            api_url(chosen),
            user_identity(chosen),
            str(Path.cwd()),
            headers=auth_headers(chosen),
            first=first,
            answered=answered,
        )

    main(serve)
    return 0

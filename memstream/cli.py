"""The ``memstream`` command: up, publish, init, remember, replay, search, block, history, hook, mcp.

Only the argument parser lives here. Each verb's code is in ``memstream.commands`` and is imported
when that verb runs, so the read verbs, the hooks and MCP over stdio never load the pipeline.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import Any

from memstream.commands import CliError
from memstream.settings import Settings, SettingsError

__all__ = ["CliError", "main"]


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
        return int(_verb(args.run)(args, settings) or 0)
    except (CliError, SettingsError) as exc:
        if getattr(args, "never_fail", False):  # a hook must not break the agent that runs it
            return 0
        print(f"memstream: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before `up` installed its handlers: still a stop asked for
        return 0 if args.run == "pipeline:cmd_up" else 130


def _verb(where: str) -> Callable[[argparse.Namespace, Settings], Any]:
    """``module:function`` under memstream.commands, imported now."""
    module, function = where.split(":")
    return getattr(importlib.import_module(f"memstream.commands.{module}"), function)  # type: ignore[no-any-return]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memstream", description="Streaming memory for coding agents.")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

    up = sub.add_parser("up", help="run broker (embedded by default), store, all agents and the search API")
    up.set_defaults(run="pipeline:cmd_up")

    pub = sub.add_parser("publish", help="publish one turn, or a JSONL file of turns, to the turns topic")
    pub.add_argument("content", nargs="?", help="the message text (omit with --file)")
    pub.add_argument("--file", "-f", help="JSONL file of turns ('-' for stdin)")
    pub.add_argument("--session", "-s", help="session id")
    pub.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    pub.add_argument("--role", "-r", default="user", help="user, assistant, system or tool (default: user)")
    pub.add_argument("--user", default="", help="user identity for user-scoped memories")
    pub.set_defaults(run="pipeline:cmd_publish")

    init = sub.add_parser("init", help="extract a project's foundational facts from its README and manifests")
    init.add_argument("directory", nargs="?", default=".", help="the project directory (default: .)")
    init.set_defaults(run="pipeline:cmd_init")

    remember = sub.add_parser("remember", help="store one memory directly, as 'remember that…' in a turn does")
    remember.add_argument("text")
    remember.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    remember.add_argument("--type", "-t", help="memory type (default: guessed from the wording)")
    remember.add_argument("--scope", choices=("project", "user"), help="default: user for preferences")
    remember.set_defaults(run="pipeline:cmd_remember")

    replay = sub.add_parser(
        "replay", help="reprocess history from the turns topic into a shadow collection, and say what changed"
    )
    replay.add_argument("--name", required=True, help="names the shadow topics and collection (e.g. v2)")
    where = replay.add_mutually_exclusive_group()
    where.add_argument("--from-beginning", action="store_true", help="from the first turn kept (default)")
    where.add_argument("--from-time", help="from this ISO time, e.g. 2026-11-01T00:00:00Z")
    where.add_argument("--from-offset", type=int, help="from this offset in every partition")
    replay.add_argument("--switch", action="store_true", help="then make the shadow collection the live one")
    replay.set_defaults(run="pipeline:cmd_replay")

    search = sub.add_parser("search", help="semantic search over a project's memories")
    search.add_argument("query")
    search.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    search.add_argument("--limit", "-n", type=int, default=10)
    search.add_argument("--json", action="store_true", help="print the raw JSON results")
    search.set_defaults(run="read:cmd_search")

    block = sub.add_parser("block", help="print the [MEMORY] block for a project")
    block.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    block.add_argument("--query", "-q", default="", help="fills 'Relevant to Current Task'")
    block.set_defaults(run="read:cmd_block")

    history = sub.add_parser("history", help="the audit trail of one memory: every decision and change, oldest first")
    history.add_argument("memory_id")
    history.add_argument("--limit", "-n", type=int, default=100)
    history.add_argument("--json", action="store_true", help="print the raw JSON records")
    history.set_defaults(run="read:cmd_history")

    hook = sub.add_parser(
        "hook", help="a coding agent's hook: reads its JSON event on stdin (SessionStart: prints the [MEMORY] block)"
    )
    hook.add_argument("host", help="claude-code, codex or gemini")
    hook.set_defaults(run="agent:cmd_hook", never_fail=True)

    mcp = sub.add_parser("mcp", help="serve memstream's MCP tools over stdio (they call the running memstream)")
    mcp.set_defaults(run="agent:cmd_mcp")
    return parser


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

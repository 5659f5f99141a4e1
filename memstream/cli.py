"""The ``memstream`` command: up, publish, init, remember, replay, search, timeline, get, block, history, ingest, watch,
install, uninstall, hook, mcp, doc, doctor, redrive, token, forget, console, api.

Only the argument parser lives here. Each verb's code is in ``memstream.commands`` and is imported
when that verb runs, so the read verbs, the hooks and MCP over stdio never load the pipeline.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memstream import hosts
from memstream.commands import CliError
from memstream.settings import Settings, SettingsError

__all__ = ["CliError", "main"]

#: The coding CLIs capture reads, by their the capture spec ``llm_source`` name, and the hosts whose hooks it serves.
LLM_SOURCES = hosts.LLM_SOURCES
HOSTS = hosts.NAMES


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["hook"]:  # a coding CLI's hook: its own light parsing (Codex appends JSON), never a failure
        from memstream.hooks import main as hook_main

        return hook_main(argv[1:])
    if argv == ["mcp"]:  # a coding CLI waits for its handshake: no parser, no settings before the answer
        return _mcp()
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
        code = int(_verb(args.run)(args, settings) or 0)
        sys.stdout.flush()  # here, where a closed pipe can still be caught, not at the interpreter's exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except (CliError, SettingsError) as exc:
        if getattr(args, "never_fail", False):  # a hook must not break the agent that runs it
            return 0
        print(f"memstream: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before `up` installed its handlers: still a stop asked for
        return 0 if args.run == "pipeline:cmd_up" else 130


def _mcp() -> int:
    from memstream.commands.agent import cmd_mcp

    try:
        return cmd_mcp()
    except SettingsError as exc:
        print(f"memstream: {exc}", file=sys.stderr)
        return 2


def _reader_gone() -> int:
    """The reader of our output left (``memstream search … | head``): stop quietly with 0, as Unix tools do.

    Python ignores SIGPIPE, so the write raised instead; what is still buffered would raise again when
    the interpreter flushes standard output at exit, so standard output becomes /dev/null first.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


def _verb(where: str) -> Callable[[argparse.Namespace, Settings], Any]:
    """``module:function`` under memstream.commands, imported now."""
    module, function = where.split(":")
    verb: Callable[[argparse.Namespace, Settings], Any] = getattr(
        importlib.import_module(f"memstream.commands.{module}"), function
    )
    return verb


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memstream", description="Streaming memory for coding agents.")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

    _pipeline_verbs(sub)
    _read_verbs(sub)
    _admin_verbs(sub)
    _capture_verbs(sub)
    _document_verbs(sub)
    _worker_verbs(sub)
    return parser


def _pipeline_verbs(sub: Any) -> None:
    """The verbs that run the pipeline or write to it: up, publish, init, remember, replay."""
    up = sub.add_parser("up", help="run broker (embedded by default), store, all agents and the search API")
    up.set_defaults(run="pipeline:cmd_up")

    pub = sub.add_parser("publish", help="publish one turn, or a JSONL file of turns, to the turns topic")
    pub.add_argument("content", nargs="?", help="the message text (omit with --file)")
    pub.add_argument("--file", "-f", help="JSONL file of turns ('-' for stdin)")
    pub.add_argument("--session", "-s", help="session id")
    pub.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    pub.add_argument("--role", "-r", default="user", help="user, assistant, system or tool (default: user)")
    pub.add_argument("--user", default="", help="the turn's user: must be your token's (filled in when omitted)")
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


def _read_verbs(sub: Any) -> None:
    """The verbs that read memories: search, timeline, get, block, history."""
    search = sub.add_parser(
        "search", help="search a project's memories: a compact index (id, score, preview), --full for records"
    )
    search.add_argument("query")
    search.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    search.add_argument("--limit", "-n", type=int, default=10)
    search.add_argument("--json", action="store_true", help="print the raw JSON results")
    search.add_argument(
        "--documents",
        choices=("include", "exclude", "only"),
        default="include",
        help="document chunks with the memories (default), left out, or alone",
    )
    search.add_argument("--full", action="store_true", help="full records instead of the compact index")
    search.set_defaults(run="read:cmd_search")

    timeline = sub.add_parser("timeline", help="what was stored around a memory, or a session's memories, in order")
    timeline.add_argument("id", nargs="?", default="", help="the memory to look around (or give --session)")
    timeline.add_argument("--session", "-s", default="", help="follow this session from its start")
    timeline.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    timeline.add_argument("--before", type=int, default=5, help="memories before the id (default: 5)")
    timeline.add_argument("--after", type=int, default=5, help="memories after the id (default: 5)")
    timeline.add_argument("--limit", "-n", type=int, default=20, help="most memories of the session (default: 20)")
    timeline.add_argument("--json", action="store_true", help="print the raw JSON")
    timeline.set_defaults(run="read:cmd_timeline")

    get = sub.add_parser("get", help="the full records of one or more memories, by id")
    get.add_argument("ids", nargs="+", metavar="ID")
    get.add_argument("--json", action="store_true", help="print the raw JSON")
    get.set_defaults(run="read:cmd_get")

    block = sub.add_parser("block", help="print the [MEMORY] block for a project")
    block.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    block.add_argument("--query", "-q", default="", help="fills 'Relevant to Current Task'")
    block.set_defaults(run="read:cmd_block")

    history = sub.add_parser("history", help="the audit trail of one memory: every decision and change, oldest first")
    history.add_argument("memory_id")
    history.add_argument("--limit", "-n", type=int, default=100)
    history.add_argument("--json", action="store_true", help="print the raw JSON records")
    history.set_defaults(run="read:cmd_history")


def _admin_verbs(sub: Any) -> None:
    """The verbs that administer: token, forget, share, console, serve-api."""
    token = sub.add_parser("token", help="create, list and revoke the API's bearer tokens")
    token_sub = token.add_subparsers(required=True, metavar="ACTION")
    create = token_sub.add_parser("create", help="a new token (shown once) for a user and its projects, or an admin")
    create.add_argument("--user", default="", help="the user's identity (e.g. an email); its personal memories")
    create.add_argument("--project", "-p", action="append", default=[], help="a project directory it may use (repeat)")
    create.add_argument("--all-projects", action="store_true", help="every project")
    create.add_argument("--admin", action="store_true", help="may read every scope and forget users and projects")
    create.add_argument("--label", default="", help="a note to recognise it by in `memstream token list`")
    create.set_defaults(run="access:cmd_token_create")
    listing = token_sub.add_parser("list", help="every token's id, principal and state (never the token)")
    listing.set_defaults(run="access:cmd_token_list")
    revoke = token_sub.add_parser("revoke", help="revoke a token by its id; servers refuse it at once")
    revoke.add_argument("id")
    revoke.set_defaults(run="access:cmd_token_revoke")

    forget = sub.add_parser(
        "forget",
        help="forget one memory (ID --reason), or a user or a project: every memory, vector, graph link and "
        "audit record (admin)",
    )
    forget.add_argument("memory_id", nargs="?", default="", help="the id of one memory to forget (see `search`)")
    forget.add_argument("--reason", default="", help="why one memory is forgotten (kept in its audit trail)")
    which = forget.add_mutually_exclusive_group()
    which.add_argument("--user", help="the user's identity (e.g. an email)")
    which.add_argument("--project", help="the project directory")
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    forget.set_defaults(run="access:cmd_forget")

    share = sub.add_parser(
        "share",
        help="let a project's members read each other's conversations (admin; default: each reads their own); "
        "without --project, list the shared projects and every change",
    )
    share.add_argument("--project", default="", help="the project directory")
    share.add_argument("--off", action="store_true", help="stop sharing: each member reads only their own again")
    share.set_defaults(run="access:cmd_share")

    console = sub.add_parser(
        "console", help="open the memory console in a browser (a one-time sign-in link; no token in the URL)"
    )
    console.add_argument("--print", action="store_true", help="print the link only, do not open a browser")
    console.set_defaults(run="access:cmd_console")

    serve_api = sub.add_parser(
        "api", help="serve the API only (query-only: no consumer group, no agents) beside `up` workers"
    )
    serve_api.set_defaults(run="access:cmd_api")


def _capture_verbs(sub: Any) -> None:
    """The verbs that capture the coding CLIs' sessions: ingest, watch, install/uninstall, hook, mcp."""
    ingest = sub.add_parser("ingest", help="capture the coding CLIs' session files (backlog and new turns)")
    ingest.add_argument("paths", nargs="*", type=Path, help="session files or folders (default: the standard places)")
    ingest.add_argument("--llm", choices=LLM_SOURCES, help="read every file as this CLI's format")
    ingest.add_argument("--since", help="only messages from this ISO date or time on (e.g. 2026-01-31)")
    ingest.add_argument(
        "--dry-run", action="store_true", help="publish nothing, write no checkpoint: say what would be"
    )
    ingest.add_argument("--json", action="store_true", help="print the turns (one JSON object a line) instead")
    ingest.add_argument(
        "--project",
        metavar="DIR",
        help="the project directory of sessions whose files cannot name theirs (an export, another machine's copy)",
    )
    _root_flags(ingest)
    ingest.set_defaults(run="capture:cmd_ingest")

    watch = sub.add_parser("watch", help="follow the coding CLIs' session folders and capture new turns live")
    _root_flags(watch)
    watch.set_defaults(run="capture:cmd_watch")

    for verb, text in (("install", "add"), ("uninstall", "remove")):
        command = sub.add_parser(verb, help=f"{text} memstream's hooks and MCP server in a coding CLI's settings")
        command.add_argument("host", choices=HOSTS)
        scope = command.add_mutually_exclusive_group()
        scope.add_argument("--project", type=Path, metavar="DIR", help="that project's settings")
        scope.add_argument("--user", action="store_true", help="your user settings (the default)")
        command.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
        if verb == "install":
            command.add_argument(
                "--data-dir",
                type=Path,
                metavar="DIR",
                help="the data dir the hooks capture into: the one your memstream up uses "
                "(default: MEMSTREAM_DATA_DIR, else .memstream here)",
            )
            command.add_argument(
                "--check",
                action="store_true",
                help="change nothing: say whether the hooks are installed, when each last ran, if the spool is sent",
            )
        command.set_defaults(run="capture:cmd_install", remove=verb == "uninstall")

    hook = sub.add_parser(
        "hook",
        help="a coding agent's hook: captures new turns; at SessionStart prints the [MEMORY] block (never fails)",
    )
    hook.add_argument("host", help="claude-code, codex, gemini or kimi")
    hook.add_argument("--data-dir", help="memstream's data dir (install writes it here)")
    hook.add_argument("payload", nargs="*", help="Codex notify's JSON (the other hosts write it on stdin)")
    hook.set_defaults(run="agent:cmd_hook", never_fail=True)

    mcp = sub.add_parser("mcp", help="serve memstream's MCP tools over stdio (they call the running memstream)")
    mcp.add_argument(
        "--host",
        choices=HOSTS,
        help="use the data dir `memstream install HOST` chose (when MEMSTREAM_DATA_DIR is not set)",
    )
    mcp.set_defaults(run="agent:cmd_mcp")


def _document_verbs(sub: Any) -> None:
    """The documents verb: doc add, list, show, remove."""
    doc = sub.add_parser("doc", help="documents: add a URL, file or stdin as searchable chunks; list, show, remove")
    doc_sub = doc.add_subparsers(required=True, metavar="ACTION")
    doc_add = doc_sub.add_parser("add", help="ingest a URL, a file, or '-' (standard input)")
    doc_add.add_argument("source", help="an http(s) URL, a file's path, or '-' for standard input")
    doc_add.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    doc_add.add_argument("--title", "-t", default="", help="the title (default: the page's, or the file's name)")
    doc_add.set_defaults(run="workers:cmd_doc_add")
    doc_list = doc_sub.add_parser("list", help="the project's documents with their status")
    doc_list.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    doc_list.add_argument("--json", action="store_true", help="print the raw JSON")
    doc_list.set_defaults(run="workers:cmd_doc_list")
    doc_show = doc_sub.add_parser("show", help="one document: status trail and chunks")
    doc_show.add_argument("document_id")
    doc_show.add_argument("--json", action="store_true", help="print the raw JSON")
    doc_show.set_defaults(run="workers:cmd_doc_show")
    doc_remove = doc_sub.add_parser("remove", help="remove a document and all its chunks")
    doc_remove.add_argument("document_id")
    doc_remove.set_defaults(run="workers:cmd_doc_remove")


def _worker_verbs(sub: Any) -> None:
    """The verbs that look after the workers: doctor, redrive."""
    doctor = sub.add_parser(
        "doctor", help="the maintenance worker's report: queue, index and storage health, and what it recommends"
    )
    doctor.add_argument("--execute", action="store_true", help="run the recommended repairs once, then measure again")
    doctor.add_argument("--json", action="store_true", help="print the raw JSON report")
    doctor.add_argument(
        "--stale",
        action="store_true",
        help="list this project's memories whose cited code changed, moved or is gone (checked here, with git)",
    )
    doctor.add_argument("--project", default="", help="with --stale: the project directory (default: the current one)")
    doctor.set_defaults(run="workers:cmd_doctor")

    redrive = sub.add_parser(
        "redrive", help="send dead-lettered events back to the topic they came from (each dead letter once)"
    )
    redrive.add_argument("--stage", default="", help="only dead letters of this stage (extract, decode:<topic>, …)")
    redrive.add_argument("--reason", default="", help="only dead letters whose reason contains this text")
    redrive.add_argument("--since", default="", help="only dead letters from this ISO time, or this long ago (2h, 7d)")
    redrive.add_argument("--dry-run", action="store_true", help="list what would be re-driven, send nothing")
    redrive.add_argument("--limit", "-n", type=int, help="re-drive at most this many, oldest first")
    redrive.set_defaults(run="workers:cmd_redrive")


def _root_flags(parser: argparse.ArgumentParser) -> None:
    for name in LLM_SOURCES:
        parser.add_argument(f"--{name}-dir", type=Path, help=f"{name}'s home folder (MEMSTREAM_{name.upper()}_DIR)")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

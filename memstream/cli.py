"""The ``memstream`` command: up, publish, init, remember, replay, search, block, history."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import msgspec

from memstream.settings import Settings, SettingsError


class CliError(Exception):
    """A problem to report in one line, with a non-zero exit."""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
        return int(args.run(args, settings) or 0)
    except (CliError, SettingsError) as exc:
        print(f"memstream: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memstream", description="Streaming memory for coding agents.")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

    up = sub.add_parser("up", help="run broker (embedded by default), store, all agents and the search API")
    up.set_defaults(run=cmd_up)

    pub = sub.add_parser("publish", help="publish one turn, or a JSONL file of turns, to the turns topic")
    pub.add_argument("content", nargs="?", help="the message text (omit with --file)")
    pub.add_argument("--file", "-f", help="JSONL file of turns ('-' for stdin)")
    pub.add_argument("--session", "-s", help="session id")
    pub.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    pub.add_argument("--role", "-r", default="user", help="user, assistant, system or tool (default: user)")
    pub.add_argument("--user", default="", help="user identity for user-scoped memories")
    pub.set_defaults(run=cmd_publish)

    init = sub.add_parser("init", help="extract a project's foundational facts from its README and manifests")
    init.add_argument("directory", nargs="?", default=".", help="the project directory (default: .)")
    init.set_defaults(run=cmd_init)

    remember = sub.add_parser("remember", help="store one memory directly, as 'remember that…' in a turn does")
    remember.add_argument("text")
    remember.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    remember.add_argument("--type", "-t", help="memory type (default: guessed from the wording)")
    remember.add_argument("--scope", choices=("project", "user"), help="default: user for preferences")
    remember.set_defaults(run=cmd_remember)

    replay = sub.add_parser(
        "replay", help="reprocess history from the turns topic into a shadow collection, and say what changed"
    )
    replay.add_argument("--name", required=True, help="names the shadow topics and collection (e.g. v2)")
    where = replay.add_mutually_exclusive_group()
    where.add_argument("--from-beginning", action="store_true", help="from the first turn kept (default)")
    where.add_argument("--from-time", help="from this ISO time, e.g. 2026-11-01T00:00:00Z")
    where.add_argument("--from-offset", type=int, help="from this offset in every partition")
    replay.add_argument("--switch", action="store_true", help="then make the shadow collection the live one")
    replay.set_defaults(run=cmd_replay)

    search = sub.add_parser("search", help="semantic search over a project's memories")
    search.add_argument("query")
    search.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    search.add_argument("--limit", "-n", type=int, default=10)
    search.add_argument("--json", action="store_true", help="print the raw JSON results")
    search.set_defaults(run=cmd_search)

    block = sub.add_parser("block", help="print the [MEMORY] block for a project")
    block.add_argument("--project", "-p", default=".", help="project directory (default: .)")
    block.add_argument("--query", "-q", default="", help="fills 'Relevant to Current Task'")
    block.set_defaults(run=cmd_block)

    history = sub.add_parser("history", help="the audit trail of one memory: every decision and change, oldest first")
    history.add_argument("memory_id")
    history.add_argument("--limit", "-n", type=int, default=100)
    history.add_argument("--json", action="store_true", help="print the raw JSON records")
    history.set_defaults(run=cmd_history)
    return parser


# --- up ------------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return asyncio.run(_up(settings))


async def _up(settings: Settings) -> int:
    from memstream import runner
    from memstream.tracing import configure_tracing

    if runner.read_runtime_file(settings):
        raise CliError(f"memstream is already running with data dir {settings.data_dir} (see {settings.runtime_file})")
    configure_tracing(settings.trace_exporter)
    print("memstream: starting…", flush=True)
    running = await runner.start(settings)
    print(_banner(running), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        print("\nmemstream: stopping…", flush=True)
        await running.stop()
        print("memstream: stopped.", flush=True)
    return 0


def _banner(running: Any) -> str:
    s: Settings = running.settings
    p = running.providers
    broker = (
        f"Tansu (embedded, memory only) on {running.bootstrap}" if running.broker else f"Kafka at {running.bootstrap}"
    )
    store = f"Qdrant server at {s.qdrant_url}" if s.qdrant_url else f"Qdrant edge (in-process) in {s.store_dir}"
    llm = (
        (p.llm.describe() if hasattr(p.llm, "describe") else f"{p.llm.provider} {p.llm.model}")
        if p.llm
        else "NONE — RAW MODE: turns are stored as conversation memories, no extraction.\n"
        "               Set ANTHROPIC_API_KEY for typed facts, summaries and contradiction checks."
    )
    return "\n".join(
        [
            f"memstream is up in {running.started_in:.1f}s",
            f"  broker:     {broker}",
            f"  topics:     {s.topic_prefix}.* ({s.partitions} partitions; consolidation has 1)",
            f"  store:      {store}",
            f"  embeddings: {p.embedder.model} ({p.embedder.dim}-d)",
            f"  llm:        {llm}",
            f"  search API: {s.api_url}/search?q=…&project=DIR   {s.api_url}/block?project=DIR",
            f"  data dir:   {s.data_dir.resolve()}",
            "Publish turns with `memstream publish`, query with `memstream search` / `memstream block`.",
            "Press Ctrl-C to stop.",
        ]
    )


# --- publish -------------------------------------------------------------------------


def cmd_publish(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.publish import TurnError, make_turn, parse_jsonl, publish, read_jsonl

    try:
        if args.file:
            if args.content:
                raise TurnError("give either --file or a message, not both")
            turns = parse_jsonl(sys.stdin, name="stdin") if args.file == "-" else read_jsonl(Path(args.file))
        else:
            if not args.content:
                raise TurnError("nothing to publish: give a message or --file")
            if not args.session:
                raise TurnError("--session is required when publishing one message")
            turns = [
                make_turn(
                    session_id=args.session,
                    project=str(Path(args.project).resolve()),
                    role=args.role,
                    content=args.content,
                    user=args.user or settings.user or _git_email(),
                )
            ]
    except TurnError as exc:
        raise CliError(str(exc)) from None
    # The project key hashes the absolute directory: resolve it here, where the
    # relative path means something, not in a worker with another working directory.
    turns = [msgspec.structs.replace(t, project=str(Path(t.project).resolve())) for t in turns]
    bootstrap = _bootstrap(settings)
    count = asyncio.run(publish(bootstrap, settings.topic_prefix, turns))
    print(f"published {count} turn{'s' if count != 1 else ''} to {settings.topic_prefix}.turns")
    return 0


def _bootstrap(settings: Settings) -> str:
    if settings.kafka_bootstrap:
        return settings.kafka_bootstrap
    from memstream.runner import read_runtime_file

    runtime = read_runtime_file(settings)
    if runtime is None:
        raise CliError(
            f"memstream is not running (no live {settings.runtime_file}): start `memstream up` first, "
            "or set MEMSTREAM_KAFKA_BOOTSTRAP"
        )
    return str(runtime["bootstrap"])


def _git_email() -> str:
    import subprocess

    try:
        out = subprocess.run(["git", "config", "user.email"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# --- init and remember ----------------------------------------------------------------


def cmd_init(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import UTC, datetime

    from memstream.identity import derived_id, project_key, user_key
    from memstream.project_files import PROJECT_FILES, read_project_files
    from memstream.publish import publish_events
    from memstream.rules.secrets import redact
    from memstream.schemas import Snapshot
    from memstream.topics import SNAPSHOTS

    directory = Path(args.directory).resolve()
    if not directory.is_dir():
        raise CliError(f"{directory} is not a directory")
    files = read_project_files(directory)
    if not files:
        raise CliError(f"nothing to read in {directory}: none of {', '.join(PROJECT_FILES[:6])}, … exists")
    key = project_key(str(directory))
    snapshot = Snapshot(
        snapshot_id=derived_id(key, "init", datetime.now(UTC).isoformat()),
        session_id=f"init:{key}",
        project=str(directory),
        project_key=key,
        user_key=user_key(settings.user or _git_email()),
        mode="init",
        text=redact(files),
        turn_index=0,
        ts=datetime.now(UTC),
    )
    asyncio.run(
        publish_events(_bootstrap(settings), settings.topic_prefix, SNAPSHOTS, [(snapshot.session_id, snapshot)])
    )
    sections = sum(1 for line in files.splitlines() if line.startswith("=== ") and line.endswith(" ==="))
    plural = "s" if sections != 1 else ""
    print(f"published an init snapshot of {directory} ({sections} file{plural}, {len(files)} characters)")
    return 0


def cmd_remember(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import UTC, datetime

    from memstream.identity import derived_id, project_key, user_key
    from memstream.publish import publish_events
    from memstream.rules.explicit import guess_type
    from memstream.rules.secrets import redact
    from memstream.schemas import MEMORY_TYPES, Fact
    from memstream.topics import FACTS

    text = redact(args.text.strip())
    if len(text) < 10:
        raise CliError("a memory needs at least 10 characters")
    guessed_type, guessed_scope = guess_type(text)
    kind = args.type or guessed_type
    if kind not in MEMORY_TYPES:
        raise CliError(f"unknown type {kind!r} (expected one of: {', '.join(MEMORY_TYPES)})")
    scope = args.scope or ("user" if kind == "preference" else guessed_scope if not args.type else "project")
    project = str(Path(args.project).resolve())
    if scope == "user":
        identity = settings.user or _git_email()
        if not identity:
            raise CliError("a user-scoped memory needs MEMSTREAM_USER or a git user.email")
        scope_key = user_key(identity)
    else:
        scope_key = project_key(project)
    now = datetime.now(UTC)
    fact = Fact(
        fact_id=derived_id(scope_key, "remember", text, now.isoformat()),
        text=text,
        type=kind,  # type: ignore[arg-type]
        scope=scope,  # type: ignore[arg-type]
        scope_key=scope_key,
        project=project,
        origin="cli:remember",
        confidence=1.0,
        ts=now,
    )
    asyncio.run(publish_events(_bootstrap(settings), settings.topic_prefix, FACTS, [(scope_key, fact)]))
    print(f"remembered ({kind}, {scope} scope): {text}")
    return 0


# --- replay -----------------------------------------------------------------------


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import datetime

    from memstream.replay import ReplayError, Start, replay
    from memstream.runner import read_runtime_file

    start = Start()
    if args.from_time:
        try:
            start = Start(timestamp=datetime.fromisoformat(args.from_time.replace("Z", "+00:00")))
        except ValueError:
            raise CliError(f"--from-time {args.from_time!r} is not an ISO time") from None
    elif args.from_offset is not None:
        if args.from_offset < 0:
            raise CliError("--from-offset must be 0 or more")
        start = Start(offset=args.from_offset)
    runtime = read_runtime_file(settings)
    api_url = str(runtime["api_url"]) if runtime else settings.api_url
    logging.basicConfig(level=settings.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        summary = asyncio.run(
            replay(
                settings,
                name=args.name,
                bootstrap=_bootstrap(settings),
                api_url=api_url,
                start=start,
                switch=args.switch,
            )
        )
    except ReplayError as exc:
        raise CliError(str(exc)) from None
    print(summary.render())
    return 0


# --- search and block ----------------------------------------------------------------


def _api_get(settings: Settings, path: str, params: dict[str, str]) -> tuple[str, str]:
    from memstream.runner import read_runtime_file

    runtime = read_runtime_file(settings)
    base = str(runtime["api_url"]) if runtime else settings.api_url
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.headers.get_content_type(), response.read().decode()
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")
        try:
            message = json.loads(body)["error"]
        except (ValueError, KeyError, TypeError):
            message = body[:200]
        raise CliError(f"{path} failed ({exc.code}): {message}") from None
    except urllib.error.URLError as exc:
        raise CliError(f"cannot reach memstream at {base} ({exc.reason}): is `memstream up` running?") from None


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    project = str(Path(args.project).resolve())
    params = {"q": args.query, "project": project, "limit": str(args.limit), "user": settings.user or _git_email()}
    _, body = _api_get(settings, "/search", params)
    if args.json:
        print(body)
        return 0
    results = json.loads(body)["results"]
    if not results:
        print(f"no memories match {args.query!r} in {project}")
    for hit in results:
        print(f"{hit['distance']:.3f}  [{hit['type']}] {hit['text']}")
    return 0


def cmd_block(args: argparse.Namespace, settings: Settings) -> int:
    project = str(Path(args.project).resolve())
    params = {"project": project, "q": args.query, "user": settings.user or _git_email()}
    _, body = _api_get(settings, "/block", params)
    print(body)
    return 0


# --- history -------------------------------------------------------------------------


def format_record(record: dict[str, Any]) -> str:
    """One audit record (as the API returns it) on one line.

    Time (UTC, to the second), outcome, action, the memory and the one it points at
    (``->``: the successor of a superseded memory, the target of a proposal), the reason,
    the model and prompt version that decided, and a flag when a human should review.
    """
    from datetime import UTC, datetime

    ts = datetime.fromisoformat(str(record["ts"]).replace("Z", "+00:00")).astimezone(UTC)
    about = record.get("memory_id") or "-"
    if record.get("target_id"):
        about += f" -> {record['target_id']}"
    model, prompt = record.get("model") or "", record.get("prompt_version") or ""
    decided_by = f"{model or '?'} ({prompt})" if prompt else model or "-"
    line = "  ".join(
        [
            ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
            f"{record['outcome']:<10}",
            f"{record.get('action') or '-':<6}",
            about,
            record.get("reason") or "-",
            decided_by,
        ]
    )
    return line + ("  REVIEW NEEDED" if record.get("review_needed") else "")


def cmd_history(args: argparse.Namespace, settings: Settings) -> int:
    memory_id = args.memory_id.strip()
    if not memory_id:
        raise CliError("give the id of a memory")
    if args.limit < 1:
        raise CliError("--limit must be 1 or more")
    _, body = _api_get(settings, "/history", {"memory_id": memory_id, "limit": str(args.limit)})
    records = json.loads(body)["records"]
    if not records:
        raise CliError(f"no history for memory {memory_id}")
    if args.json:
        print(body)
        return 0
    for record in records:
        print(format_record(record))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

"""Capture's verbs: ingest, watch, install and uninstall (the capture spec). They import no Faust; publishing goes
through :mod:`memstream.capture.spool`, which loads the Kafka client only when there is something to send."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from memstream import hosts
from memstream.commands import CliError
from memstream.settings import Settings

LLM_SOURCES = hosts.LLM_SOURCES


def with_roots(settings: Settings, args: argparse.Namespace) -> Settings:
    """The settings with the CLIs' home folders given as flags (``--claude-dir`` …)."""
    overrides = {
        f"{name}_dir": getattr(args, f"{name}_dir") for name in LLM_SOURCES if getattr(args, f"{name}_dir", None)
    }
    return dataclasses.replace(settings, **overrides) if overrides else settings


def capture_user(settings: Settings) -> str:
    """The user captured turns are published as (memstream.runtime.capture_user), or CliError
    with the one line that says why capture may not publish."""
    from memstream.auth import AuthError
    from memstream.runtime import capture_user as resolve

    try:
        return resolve(settings)
    except AuthError as exc:
        raise CliError(str(exc)) from None


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.capture.model import Source
    from memstream.capture.run import ingest, parse_since

    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return ingest(
        with_roots(settings, args),
        args.paths,
        llm=Source(args.llm) if args.llm else None,
        since=since,
        dry_run=args.dry_run,
        as_json=args.json,
        # A dry run publishes nothing, so it needs no token.
        user="" if args.dry_run else capture_user(settings),
        project=os.path.abspath(os.path.expanduser(args.project)) if args.project else "",
    )


def start_capture(settings: Settings, bootstrap: str) -> list[asyncio.Task[Any]]:
    """At ``up``: send what hooks spooled while memstream was down, then what they spool, about every
    second; release held-back replies of quiet session files; follow the CLIs' folders too when
    ``MEMSTREAM_WATCH`` is on."""
    from memstream.capture.spool import drain
    from memstream.commands.access import local_identity

    # `up` is the pipeline's own process: its spool is what this machine's hooks handed it, sent
    # as the caller's token's user (the local token's on the embedded default).
    try:
        user = capture_user(settings)
    except CliError:
        user = local_identity(settings)

    def sent(count: int) -> None:
        logging.getLogger("memstream.capture").info("sent %d spooled turns", count)

    from memstream.capture.watch import release_forever, take_notes_forever

    tasks = [
        asyncio.create_task(drain(settings, bootstrap, user=user, on_sent=sent)),
        # Hooks that found this `up` running left their payloads as notes: read those session files.
        asyncio.create_task(take_notes_forever(settings)),
        # Held-back replies are released once their file is quiet, watched or not (the drain sends them).
        asyncio.create_task(release_forever(settings)),
    ]
    if settings.watch:
        from memstream.capture.watch import watch

        async def nothing() -> int:  # the drain above sends what watch spools
            return 0

        tasks.append(asyncio.create_task(watch(settings, nothing)))
    return tasks


def cmd_install(args: argparse.Namespace, settings: Settings) -> int:
    """Install, uninstall or (``--check``) report memstream's hooks and MCP server for one host."""
    import os

    from memstream.capture.install import InstallError, apply, plan

    project = args.project.expanduser().resolve() if args.project else None
    if project is not None and not project.is_dir():
        raise CliError(f"{project} is not a directory")
    home = Path.home()
    given = getattr(args, "data_dir", None)
    # The data dir is resolved here, once, to an absolute path the hooks keep: --data-dir, else
    # MEMSTREAM_DATA_DIR, else .memstream in this directory (which a warning below questions).
    chosen = given is not None or bool(os.environ.get("MEMSTREAM_DATA_DIR"))
    data_dir = (given or settings.data_dir).expanduser().resolve()
    settings = dataclasses.replace(settings, data_dir=data_dir)
    if getattr(args, "check", False):
        from memstream.capture.check import check

        status, lines = check(args.host, settings, project=project, home=home)
        print("\n".join(lines))
        return status
    try:
        planned = plan(args.host, settings, project=project, home=home, remove=args.remove)
    except InstallError as exc:
        raise CliError(str(exc)) from None
    changed = [c for c in planned.changes if c.changed]
    verb = "uninstall" if args.remove else "install"
    if args.dry_run:
        for change in changed:
            print(change.diff(), end="")
        if not changed:
            print(f"memstream {verb} {args.host}: nothing to change")
        return 0
    apply(planned)
    for change in planned.changes:
        state = "removed" if change.after is None and change.changed else "updated" if change.changed else "unchanged"
        print(f"{state}: {change.path}")
    if args.remove:
        return 0
    print(f"data dir: {data_dir} (the hooks spool to {settings.capture_db}; memstream up must use this data dir)")
    from memstream.capture.check import data_dir_warning

    warning = data_dir_warning(data_dir, chosen=chosen)
    if warning:
        print(f"memstream: warning: {warning}", file=sys.stderr)
    for note in planned.notes:
        print(f"note: {note}")
    return 0


def cmd_watch(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.capture.spool import flush, pending
    from memstream.capture.watch import watch
    from memstream.runtime import publish_target

    settings = with_roots(settings, args)
    user = capture_user(settings)
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def send_spool() -> int:
        target = publish_target(settings)
        if target is None:
            print(f"memstream is not running: {pending(settings)} turns wait in the spool", flush=True)
            return 0
        sent = await flush(dataclasses.replace(settings, topic_prefix=target[1]), target[0], user=user)
        if sent:
            print(f"published {sent} turn{'s' if sent != 1 else ''}", flush=True)
        return sent

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        roots = ", ".join(str(p) for p in settings.capture_roots.values())
        print(f"memstream: watching {roots} (Ctrl-C to stop)", flush=True)
        await watch(settings, send_spool, stop=stop)

    asyncio.run(run())
    return 0

"""The pipeline's verbs: up, publish, init, remember, replay (they import what runs the pipeline)."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

import msgspec

from memstream.commands import CliError
from memstream.commands.access import (
    access_line,
    as_principal,
    kafka_security,
    local_token_for_up,
    write_principal,
)
from memstream.runtime import client_token
from memstream.settings import Settings

# --- up ------------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        status = loop.run_until_complete(_up(settings))
    except BaseException:
        _end(loop)
        raise
    _end(loop, status)
    _leave_threads(status)
    return status


#: Seconds the tasks left after `up` stopped get to end once cancelled.
LEFTOVER_SECONDS = 3.0
#: Seconds the threads still running after `up` stopped get to end (a shut-down executor's idle threads
#: end at once).
THREAD_SECONDS = 1.0


def _end(loop: asyncio.AbstractEventLoop, status: int | None = None) -> None:
    """Cancel the tasks left on the loop. asyncio.run waits for them without end, and a task of a Faust
    service that did not stop in time (a client retrying a broker that is gone) never ends: `up` said
    "stopped." and ran on (issue 42). One that has not ended within LEFTOVER_SECONDS is left, and the
    process exits with ``status`` without waiting for it."""
    left = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.wait(left, timeout=LEFTOVER_SECONDS))
    stuck = [task for task in left if not task.done()]
    if stuck and status is not None:
        logging.getLogger(__name__).warning("%d tasks did not end once cancelled; exiting without them", len(stuck))
        _exit_now(status)
    with contextlib.suppress(RuntimeError):
        loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def _leave_threads(status: int) -> None:
    """Exit with ``status`` without waiting for a thread still at work once `up` has stopped. Python's
    exit joins every executor's threads, and the bundled embedder's document thread can be inside one
    C batch for many seconds (longer at its lowered priority on a busy machine): Ctrl-C kept the process
    alive that long after "stopped." (issue 42.3). What such a thread computes has nowhere to go: the
    pipeline has stopped, and its turns stay unfinished in the turn log for the next start."""
    deadline = time.monotonic() + THREAD_SECONDS
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    busy = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if busy:
        logging.getLogger(__name__).info("exiting without %d threads still at work: %s", len(busy), ", ".join(busy))
        atexit._run_exitfuncs()  # what os._exit would skip: the broker's stop, tracing's flush
        _exit_now(status)


def _exit_now(status: int) -> NoReturn:
    logging.shutdown()
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status)


#: Seconds between checks that every Faust service of a running worker is alive.
WATCH_SECONDS = 1.0
#: Exit status of `memstream up` when the worker is not live: a Faust service crashed, or a partition
#: made no progress for health.LIVE_STALL_SECONDS (a supervisor restarts it).
EXIT_CRASHED = 70


async def _up(settings: Settings) -> int:
    from memstream.telemetry import dump
    from memstream.telemetry.tracing import configure_tracing
    from memstream.worker import drain, runner
    from memstream.worker.api_thread import ApiThread
    from memstream.worker.recycle import Recycler

    if runner.read_runtime_file(settings):
        raise CliError(f"memstream is already running with data dir {settings.data_dir} (see {settings.runtime_file})")
    _check_port(settings.http_host, settings.http_port)
    configure_tracing(settings.trace_exporter)
    local_token_for_up(settings)
    # Signals first: a Ctrl-C or SIGTERM at any moment of start-up stops what has started; a second
    # one while the pipeline drains stops at once (memstream.worker.drain).
    stop, now = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: now.set() if stop.is_set() else stop.set())
    _say("memstream: starting…")
    from memstream.worker import durable

    async def recover(bootstrap: str) -> None:  # the turn log's unfinished turns, before any new one
        await durable.recover(settings, bootstrap)

    # The API's socket is `up`'s, not the worker's: it stays open while the broker and the worker are
    # started afresh, and its requests wait for the fresh worker (issue 35.7).
    api = ApiThread(settings.http_host, settings.http_port)
    starting = asyncio.create_task(runner.start(settings, before_worker=recover, api=api))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        _say("\nmemstream: stopping (start-up interrupted)…")
        starting.cancel()  # runner.start stops the worker and broker it started
        await asyncio.wait({starting})
        await api.close()
        _say("memstream: stopped.")
        return 0
    stopping.cancel()
    try:
        running = starting.result()
    except BaseException:
        await api.close()
        raise
    dump.install(loop, lambda: running.pipeline.app)  # kill -USR1: what it is doing, in its log
    _say(_banner(running))
    from memstream.commands.capture import start_capture

    capture = start_capture(settings, running.bootstrap)
    recycler = Recycler(settings.broker_max_mb)
    sweep = durable.DoneSweep(settings)  # marks the turn log's turns done once stored
    status = 0
    try:
        while not stop.is_set():
            # Not live: a service crashed, or a partition made no progress past health.LIVE_STALL_SECONDS.
            now_status = running.health()
            if not now_status.live:
                _say(f"memstream: the worker is not live, exiting: {'; '.join(now_status.problems)}", sys.stderr)
                status = EXIT_CRASHED
                break
            if await recycler.due(running):
                _say("memstream: starting the embedded broker afresh (it holds more than MEMSTREAM_BROKER_MAX_MB)…")
                await _stop_capture(capture)
                running = await recycler.recycle(running)
                capture = start_capture(settings, running.bootstrap)
                _say(f"memstream: the embedded broker was started afresh on {running.bootstrap}.")
            await sweep.tick(running.pipeline.app, running.bootstrap)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), WATCH_SECONDS)
    finally:
        _say("\nmemstream: stopping…")
        # However the stop goes, the process ends within the drain bound and a grace.
        deadline = drain.Deadline(settings.drain_seconds + drain.STOP_GRACE_SECONDS, lambda: running.broker_pid)
        deadline.start()
        began = time.monotonic()
        await _stop_capture(capture)  # no more turns taken in
        drained = status == 0 and await drain.drain(running, settings.drain_seconds, _say, now)
        drained_in = time.monotonic() - began
        await sweep.close()
        try:
            await running.stop(cancel=not drained)
        finally:
            await api.close()
        parts = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in running.stop_timings.items())
        took = f"in {time.monotonic() - began:.1f}s: drain {drained_in:.1f}s, {parts}"
        _say(
            f"memstream: stopped ({took})." if drained else f"memstream: stopped (not everything was drained; {took})."
        )
    return status or (0 if drained else drain.EXIT_NOT_DRAINED)


def _check_port(host: str, port: int) -> None:
    """Refuse at once, in one line, a port another process listens on: the worker would find out
    only once its broker, tables and agents had started, and exit with a traceback."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds it
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CliError(
                f"the API's address {host}:{port} is not free ({exc.strerror}): another memstream up, or another "
                "program, listens there; stop it or set MEMSTREAM_HTTP_PORT"
            ) from exc


async def _stop_capture(capture: list[asyncio.Task[Any]]) -> None:
    for task in capture:
        task.cancel()
    await asyncio.gather(*capture, return_exceptions=True)


def _say(text: str, stream: Any = None) -> None:
    """Print, never failing: a closed terminal or pipe must not keep `up` from stopping."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=stream or sys.stdout, flush=True)


def _banner(running: Any) -> str:
    s: Settings = running.settings
    p = running.providers
    bound = f"; started afresh above {s.broker_max_mb} MB" if s.broker_max_mb else ""
    broker = (
        f"Tansu (embedded, memory only{bound}) on {running.bootstrap}"
        if running.broker
        else f"Kafka at {running.bootstrap}"
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
            f"  MCP:        {s.api_url}/mcp (streamable HTTP), or `memstream mcp` (stdio)",
            f"  console:    {s.api_url}/console (`memstream console` opens it signed in)",
            f"  access:     {access_line(s)}",
            f"  data dir:   {s.data_dir.resolve()}",
            "Port and data dir: MEMSTREAM_HTTP_PORT and MEMSTREAM_DATA_DIR (`make up PORT=9000 DATA=~/mem`).",
            "Publish turns with `memstream publish`, query with `memstream search` / `memstream block`.",
            "Press Ctrl-C to stop.",
        ]
    )


# --- publish -------------------------------------------------------------------------


def cmd_publish(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.intake.publish import TurnError, make_turn, parse_jsonl, publish, read_jsonl

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
                    user=args.user,
                )
            ]
    except TurnError as exc:
        raise CliError(str(exc)) from None
    # The project key hashes the absolute directory: resolve it here, where the
    # relative path means something, not in a worker with another working directory.
    turns = [msgspec.structs.replace(t, project=str(Path(t.project).resolve())) for t in turns]
    bootstrap = _bootstrap(settings)  # "not running" first: starting `up` also makes the local token
    turns = as_principal(settings, turns)
    from memstream.intake.turnlog import TurnLog

    log = TurnLog.for_settings(settings)  # on the embedded default: "published" means it survives a crash
    try:
        count = asyncio.run(
            publish(bootstrap, settings.topic_prefix, turns, security=kafka_security(settings), log=log)
        )
    finally:
        if log is not None:
            log.close()
    print(f"published {count} turn{'s' if count != 1 else ''} to {settings.topic_prefix}.turns")
    return 0


#: How long a command waits for a starting `memstream up` to become ready.
READY_WAIT_SECONDS = 120.0


def _bootstrap(settings: Settings, *, wait: float = READY_WAIT_SECONDS) -> str:
    """The broker to publish to; waits for a `memstream up` that is still starting."""
    if settings.kafka_bootstrap:
        return settings.kafka_bootstrap
    import time

    from memstream.runtime import read_runtime_file

    deadline = time.monotonic() + wait
    while True:
        runtime = read_runtime_file(settings)
        if runtime is None:
            raise CliError(
                f"memstream is not running (no live {settings.runtime_file}): start `memstream up` first, "
                "or set MEMSTREAM_KAFKA_BOOTSTRAP"
            )
        if runtime.get("ready", True):
            return str(runtime["bootstrap"])
        if time.monotonic() > deadline:
            raise CliError(f"memstream is still starting after {wait:.0f}s (pid {runtime['pid']}); try again")
        time.sleep(0.2)


# --- init and remember ----------------------------------------------------------------


def cmd_init(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import UTC, datetime

    from memstream.auth import Forbidden, check_publish
    from memstream.identity import derived_id, project_key, user_key
    from memstream.intake.project_files import PROJECT_FILES, read_project_files
    from memstream.intake.publish import publish_events
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
    principal = write_principal(settings)
    try:
        check_publish(principal, key, "")
    except Forbidden as exc:
        raise CliError(f"refused: {exc} ({directory})") from None
    snapshot = Snapshot(
        snapshot_id=derived_id(key, "init", datetime.now(UTC).isoformat()),
        session_id=f"init:{key}",
        project=str(directory),
        project_key=key,
        user_key=user_key(principal.user),
        mode="init",
        text=redact(files),
        turn_index=0,
        ts=datetime.now(UTC),
    )
    asyncio.run(
        publish_events(
            _bootstrap(settings),
            settings.topic_prefix,
            SNAPSHOTS,
            [(snapshot.session_id, snapshot)],
            security=kafka_security(settings),
        )
    )
    sections = sum(1 for line in files.splitlines() if line.startswith("=== ") and line.endswith(" ==="))
    plural = "s" if sections != 1 else ""
    print(f"published an init snapshot of {directory} ({sections} file{plural}, {len(files)} characters)")
    return 0


def cmd_remember(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.auth import Forbidden, check_publish
    from memstream.identity import project_key
    from memstream.intake.publish import publish_events
    from memstream.intake.remember import RememberError, make_fact
    from memstream.topics import FACTS

    project = str(Path(args.project).resolve())
    principal = write_principal(settings)
    try:
        check_publish(principal, project_key(project), "")
    except Forbidden as exc:
        raise CliError(f"refused: {exc}") from None
    try:
        fact = make_fact(args.text, project=project, user=principal.user, type=args.type, scope=args.scope)
    except RememberError as exc:
        raise CliError(str(exc)) from None
    asyncio.run(
        publish_events(
            _bootstrap(settings),
            settings.topic_prefix,
            FACTS,
            [(fact.scope_key, fact)],
            security=kafka_security(settings),
        )
    )
    print(f"remembered ({fact.type}, {fact.scope} scope): {fact.text}")
    return 0


# --- replay -----------------------------------------------------------------------


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import datetime

    from memstream.runtime import read_runtime_file
    from memstream.worker.replay import ReplayError, Start, replay

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
                token=client_token(settings),
            )
        )
    except ReplayError as exc:
        raise CliError(str(exc)) from None
    print(summary.render())
    return 0

"""The verbs of Pipeline v2's workers: doc (documents), doctor (maintenance) and redrive (dead letters).

``doc add``, ``doc remove`` and ``redrive`` publish to Kafka; ``doc list|show`` and ``doctor`` ask the
running memstream's API. None of them loads the pipeline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from memstream.commands import CliError
from memstream.commands.read import api_request
from memstream.runtime import read_runtime_file
from memstream.settings import Settings

#: A maintenance cycle with repairs (a re-drive, a sweep, re-embedding) may take a while.
DOCTOR_TIMEOUT_S = 300.0


def _bootstrap(settings: Settings) -> str:
    if settings.kafka_bootstrap:
        return settings.kafka_bootstrap
    runtime = read_runtime_file(settings)
    if runtime is None:
        raise CliError(
            f"memstream is not running (no live {settings.runtime_file}): start `memstream up` first, "
            "or set MEMSTREAM_KAFKA_BOOTSTRAP"
        )
    return str(runtime["bootstrap"])


# --- doc -------------------------------------------------------------------------------


def cmd_doc_add(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.intake.documents import DocumentError, ingest_request
    from memstream.intake.publish import publish_events
    from memstream.topics import DOCUMENTS

    project = str(Path(args.project).resolve())
    content = sys.stdin.read() if args.source == "-" else None
    try:
        request = ingest_request(
            args.source,
            project=project,
            title=args.title,
            content=content,
            max_bytes=settings.document_max_content_bytes,
        )
    except DocumentError as exc:
        raise CliError(str(exc)) from None
    room = 2 * len(request.content.encode()) + 65_536  # JSON escaping, at worst, doubles it
    asyncio.run(
        publish_events(
            _bootstrap(settings),
            settings.topic_prefix,
            DOCUMENTS,
            [(request.document_id, request)],
            max_request_size=max(1_048_576, room),
        )
    )
    print(f"queued document {request.document_id} ({request.source_type}: {request.source})")
    print(f"follow it with: memstream doc show {request.document_id}")
    return 0


def cmd_doc_list(args: argparse.Namespace, settings: Settings) -> int:
    project = str(Path(args.project).resolve())
    _, body = api_request(settings, "GET", "/documents", {"project": project})
    if args.json:
        print(body)
        return 0
    documents = json.loads(body)["documents"]
    if not documents:
        print(f"no documents in {project}")
    for d in documents:
        error = f"  {d['error']}" if d["status"] == "failed" else ""
        print(f"{d['id']}  {d['status']:<10} {d['chunks']:>4} chunks  {d['title'] or '-'}  ({d['source']}){error}")
    return 0


def cmd_doc_show(args: argparse.Namespace, settings: Settings) -> int:
    _, body = api_request(settings, "GET", "/documents", {"id": args.document_id.strip()})
    if args.json:
        print(body)
        return 0
    d = json.loads(body)["document"]
    print(f"{d['id']}  {d['title'] or '-'}")
    print(f"  source:  {d['source_type']} {d['source']}")
    print(f"  status:  {d['status']} (attempt {d['attempts']}){'  error: ' + d['error'] if d['error'] else ''}")
    print(f"  text:    {d['characters']} characters in {len(d['chunks'])} chunks")
    for change in d["trail"]:
        error = f"  {change['error']}" if change.get("error") else ""
        print(f"    {change['ts']}  {change['status']:<10} attempt {change.get('attempt', 1)}{error}")
    for link in d["chunks"]:
        print(f"    chunk {link['index']:>3}  memory {link['memory_id']}")
    return 0


def cmd_doc_remove(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.intake.documents import remove_request
    from memstream.intake.publish import publish_events
    from memstream.topics import DOCUMENTS

    request = remove_request(args.document_id.strip())
    asyncio.run(
        publish_events(_bootstrap(settings), settings.topic_prefix, DOCUMENTS, [(request.document_id, request)])
    )
    print(f"removing document {request.document_id} and its chunks")
    return 0


# --- doctor --------------------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.ops.maintenance import render

    if getattr(args, "stale", False):
        from memstream.commands.stale import cmd_stale

        return cmd_stale(args, settings)

    method = "POST" if args.execute else "GET"
    _, body = api_request(settings, method, "/maintenance", {}, timeout=DOCTOR_TIMEOUT_S)
    print(body if args.json else render(json.loads(body)))
    return 0


# --- redrive ---------------------------------------------------------------------------


def cmd_redrive(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import UTC, datetime

    from memstream.ops.redrive import RedriveError, RedriveFilter, parse_since, redrive

    try:
        wanted = RedriveFilter(
            stage=args.stage.strip(),
            reason=args.reason.strip(),
            since=parse_since(args.since, datetime.now(UTC)) if args.since.strip() else None,
            limit=args.limit,
        )
        report = asyncio.run(redrive(_bootstrap(settings), settings.topic_prefix, wanted, dry_run=args.dry_run))
    except RedriveError as exc:
        raise CliError(str(exc)) from None
    print(report.render())
    return 0

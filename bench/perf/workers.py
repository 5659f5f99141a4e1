"""Pipeline v2's workers on the embedded default: document ingest, re-drive and one maintenance cycle.

    .venv/bin/python -m bench.perf.workers [--kilobytes 100] [--dead-letters 200]

Starts the whole pipeline (bundled embedder, raw mode), then prints:
- the time from publishing one text document of ``kilobytes`` KB to its ``done`` status, and
  its chunks per second (each chunk is embedded on its own, as Pipeline v2 says);
- the time ``redrive`` takes to read the dead letters and send ``dead-letters`` of them back;
- the time one maintenance ``tick()`` (observe) takes: Kafka offsets, dead letters, store health.
Figures only, no targets: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from memstream.intake.documents import ingest_request
from memstream.intake.publish import make_turn, publish_events
from memstream.kafka.broker import free_port
from memstream.ops.redrive import RedriveFilter, redrive
from memstream.schemas import DeadLetter, encode
from memstream.settings import Settings
from memstream.topics import DEAD_LETTERS, DOCUMENTS, TURNS, topic_name
from memstream.worker import runner

WORDS = [
    "deploy",
    "cache",
    "replica",
    "index",
    "shard",
    "queue",
    "token",
    "schema",
    "migration",
    "rollback",
    "canary",
    "tracing",
]


def text_of(kilobytes: int) -> str:
    sentences: list[str] = []
    i = 0
    while sum(len(s) + 1 for s in sentences) < kilobytes * 1024:
        a, b, c = WORDS[i % len(WORDS)], WORDS[(i * 7) % len(WORDS)], WORDS[(i * 5 + 3) % len(WORDS)]
        sentences.append(f"Step {i}: the {a} of service {i % 17} talks to the {b} before the {c} runs.")
        i += 1
    return "\n".join(sentences)


async def main(kilobytes: int, letters: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env({}, data_dir=Path(tmp), topic_prefix="bench-workers", http_port=free_port())
        running = await runner.start(settings, web=False, announce=False)
        try:
            prefix, bootstrap = settings.topic_prefix, running.bootstrap
            request = ingest_request(
                "-",
                project=tmp,
                title="bench",
                content=text_of(kilobytes),
                max_bytes=settings.document_max_content_bytes,
            )
            began = time.perf_counter()
            await publish_events(
                bootstrap, prefix, DOCUMENTS, [(request.document_id, request)], max_request_size=4 * 1024 * 1024
            )
            documents = running.providers.documents
            assert documents is not None
            while True:
                record = await documents.get(request.document_id)
                if record is not None and record.status in ("done", "failed"):
                    break
                await asyncio.sleep(0.05)
            seconds = time.perf_counter() - began
            print(
                f"document of {kilobytes} KB: {record.status} in {seconds:.1f}s, {len(record.chunks)} chunks, "
                f"{len(record.chunks) / seconds:.1f} chunks/s"
            )

            turns = [
                make_turn(session_id=f"b{i}", project=tmp, role="user", content=f"question {i}", ts=datetime.now(UTC))
                for i in range(letters)
            ]
            dead = [
                DeadLetter(
                    stage="bench",
                    reason="injected",
                    topic=topic_name(prefix, TURNS),
                    key=t.session_id.encode(),
                    payload=encode(t),
                    ts=datetime.now(UTC),
                )
                for t in turns
            ]
            await publish_events(bootstrap, prefix, DEAD_LETTERS, [("bench", d) for d in dead])
            began = time.perf_counter()
            report = await redrive(bootstrap, prefix, RedriveFilter(stage="bench"), by="bench")
            print(f"redrive of {len(report.sent)} dead letters: {time.perf_counter() - began:.2f}s")

            worker = running.pipeline.app.maintenance  # type: ignore[attr-defined]
            began = time.perf_counter()
            cycle = await worker.tick(mode="observe")
            print(f"maintenance tick (observe): {time.perf_counter() - began:.2f}s, score {cycle.before.score:.3f}")
        finally:
            await running.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kilobytes", type=int, default=100)
    parser.add_argument("--dead-letters", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.kilobytes, args.dead_letters))

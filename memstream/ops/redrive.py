"""Re-drive dead letters: send each back to the topic it came from, with its original bytes and key.

``memstream redrive`` and the maintenance worker's requeue action both call :func:`redrive`.
What was re-driven is recorded on the compacted ``redriven`` topic, one record per dead
letter, and a dead letter found there is never re-driven again. The event goes back with two
headers: how often it was dead-lettered so far, and the dead letter it came from; a stage
that fails on it again dead-letters it with ``attempts`` one higher (``agents.base``).

Order: the event is sent first and recorded second. A crash in between re-drives that dead
letter once more on the next run, which the pipeline absorbs (memory ids derive from content,
stages skip what they have done); recording first could lose the event. Imports no Faust.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from memstream.kafka import doorbell
from memstream.kafka.records import read_records
from memstream.logs import quiet_payload_loggers
from memstream.schemas import DeadLetter, DecodeError, Redriven, dead_letter_id, decode, encode
from memstream.topics.catalog import DEAD_LETTERS, REDRIVEN, topic_name
from memstream.topics.headers import ATTEMPTS_HEADER, REDRIVEN_FROM_HEADER

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class RedriveError(ValueError):
    """A re-drive request cannot be served; the message says why in one line."""


def parse_since(text: str, now: datetime) -> datetime:
    """``--since``: an ISO time (``Z`` allowed; naive means UTC) or a duration back from ``now`` (30m, 2h, 7d)."""
    text = text.strip()
    match = _DURATION.match(text)
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise RedriveError(f"--since {text!r} is neither an ISO time nor a duration such as 30m, 2h or 7d") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Letter:
    """A dead letter with its id (where it sits on the dead-letters topic)."""

    id: str
    letter: DeadLetter

    @property
    def redrivable(self) -> bool:
        """Only an event with its topic and bytes can go back; a sink with no message has neither."""
        return bool(self.letter.topic) and bool(self.letter.payload)


@dataclass(frozen=True)
class RedriveFilter:
    stage: str = ""
    #: Part of the reason, case-insensitive.
    reason: str = ""
    since: datetime | None = None
    limit: int | None = None


@dataclass
class Selection:
    chosen: list[Letter] = field(default_factory=list)
    #: Matched the filter but were re-driven before.
    already: int = 0
    #: Matched the filter but carry no topic or no bytes.
    unredrivable: int = 0


def select(letters: Sequence[Letter], done: set[str], wanted: RedriveFilter) -> Selection:
    """Which dead letters a re-drive sends, oldest first: those matching the filter, never
    re-driven, and redrivable, at most ``limit``."""
    selection = Selection()
    needle = wanted.reason.lower()
    for item in letters:
        letter = item.letter
        if wanted.stage and letter.stage != wanted.stage:
            continue
        if needle and needle not in letter.reason.lower():
            continue
        if wanted.since is not None and letter.ts < wanted.since:
            continue
        if item.id in done:
            selection.already += 1
        elif not item.redrivable:
            selection.unredrivable += 1
        elif wanted.limit is None or len(selection.chosen) < wanted.limit:
            selection.chosen.append(item)
    return selection


@dataclass
class RedriveReport:
    dry_run: bool
    selection: Selection
    sent: list[Redriven] = field(default_factory=list)
    #: Every dead letter on the topic, re-driven or not (the maintenance worker's dead count).
    total: int = 0

    def render(self) -> str:
        lines = []
        verb = "would re-drive" if self.dry_run else "re-drove"
        for item in self.selection.chosen:
            letter = item.letter
            where = f"{letter.stage} -> {letter.topic}  (attempts {letter.attempts})"
            lines.append(f"{verb} {item.id}  {where}  {letter.reason[:120]}")
        count = len(self.selection.chosen)
        summary = f"{verb} {count} dead letter{'s' if count != 1 else ''}"
        skipped = []
        if self.selection.already:
            skipped.append(f"{self.selection.already} re-driven before")
        if self.selection.unredrivable:
            skipped.append(f"{self.selection.unredrivable} without topic or bytes")
        lines.append(summary + (f"; skipped {', '.join(skipped)}" if skipped else ""))
        return "\n".join(lines)


async def read_topic(bootstrap: str, topic: str) -> list[tuple[int, int, bytes | None]]:
    """Every record of a topic up to its end as of now: (partition, offset, value), by partition."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer.topics()  # loads the cluster's metadata
        partitions = consumer.partitions_for_topic(topic) or set()
    finally:
        await consumer.stop()
    records = await read_records(bootstrap, {TopicPartition(topic, p): None for p in sorted(partitions)})
    return [(r.partition, r.offset, r.value) for r in records]


def _decoded(value: bytes | None, kind: type[Any]) -> Any:
    if value is None:
        return None
    try:
        event = decode(value)
    except DecodeError:
        return None
    return event if isinstance(event, kind) else None


async def dead_letters(bootstrap: str, prefix: str) -> list[Letter]:
    """Every dead letter on the topic, oldest first."""
    records = await read_topic(bootstrap, topic_name(prefix, DEAD_LETTERS))
    letters = []
    for partition, offset, value in records:
        letter = _decoded(value, DeadLetter)
        if letter is not None:
            letters.append(Letter(dead_letter_id(partition, offset), letter))
    letters.sort(key=lambda item: (item.letter.ts, item.id))
    return letters


async def original_record(bootstrap: str, letter: DeadLetter) -> tuple[bytes | None, bytes] | None:
    """The (key, value) of the record a dead letter points at, or None when it is gone."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, max_partition_fetch_bytes=8 * 1024 * 1024
    )
    await consumer.start()
    try:
        tp = TopicPartition(letter.topic, letter.partition)
        consumer.assign([tp])
        consumer.seek(tp, letter.offset)
        batch = await consumer.getmany(tp, timeout_ms=5000)
        for message in batch.get(tp, []):
            if message.offset == letter.offset and message.value is not None:
                return message.key, message.value
        return None
    finally:
        await consumer.stop()


async def redriven(bootstrap: str, prefix: str) -> set[str]:
    """The ids of the dead letters re-driven so far."""
    records = await read_topic(bootstrap, topic_name(prefix, REDRIVEN))
    done = set()
    for _, _, value in records:
        record = _decoded(value, Redriven)
        if record is not None:
            done.add(record.dead_letter)
    return done


async def redrive(
    bootstrap: str, prefix: str, wanted: RedriveFilter = RedriveFilter(), *, dry_run: bool = False, by: str = "cli"
) -> RedriveReport:
    """Send the selected dead letters back to their topics and record each; see the module doc."""
    if wanted.limit is not None and wanted.limit < 1:
        raise RedriveError("--limit must be 1 or more")
    quiet_payload_loggers()
    letters = await dead_letters(bootstrap, prefix)
    done = await redriven(bootstrap, prefix)
    report = RedriveReport(dry_run=dry_run, selection=select(letters, done, wanted), total=len(letters))
    if dry_run or not report.selection.chosen:
        return report
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=f"{prefix}-redrive", acks="all")
    await producer.start()
    try:
        for item in list(report.selection.chosen):
            letter = item.letter
            key, payload = letter.key, letter.payload
            if letter.truncated:  # the dead letter keeps the head only: the whole is at its offset
                original = await original_record(bootstrap, letter)
                if original is None:
                    report.selection.chosen.remove(item)
                    continue
                key, payload = original
            sent = await producer.send_and_wait(
                letter.topic,
                payload,
                key=key,
                headers=[
                    (ATTEMPTS_HEADER, str(letter.attempts).encode()),
                    (REDRIVEN_FROM_HEADER, item.id.encode()),
                ],
            )
            record = Redriven(
                dead_letter=item.id,
                stage=letter.stage,
                topic=letter.topic,
                partition=sent.partition,
                offset=sent.offset,
                by=by,
                ts=datetime.now(UTC),
            )
            await producer.send_and_wait(topic_name(prefix, REDRIVEN), encode(record), key=item.id.encode())
            report.sent.append(record)
    finally:
        await producer.stop()
    if report.sent:
        doorbell.ring(bootstrap)  # an idle worker on the embedded broker takes them at once
    return report

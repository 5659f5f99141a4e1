"""Which dead letters a re-drive sends, and how its arguments read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memstream.ops.redrive import Letter, RedriveError, RedriveFilter, RedriveReport, parse_since, select
from memstream.schemas import DeadLetter
from memstream.topics.headers import ATTEMPTS_HEADER, header

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def letter(n: int, *, stage: str = "extract", reason: str = "all LLM providers failed", **fields: object) -> Letter:
    values: dict[str, object] = {
        "stage": stage,
        "reason": reason,
        "topic": "memstream.snapshots",
        "partition": 0,
        "offset": n,
        "key": b"s1",
        "payload": b'{"schema":"snapshot.v1"}',
        "ts": NOW - timedelta(hours=10 - n),
    }
    values.update(fields)
    return Letter(f"0:{n}", DeadLetter(**values))  # type: ignore[arg-type]


LETTERS = [
    letter(1),
    letter(2, stage="store", reason="KeyError: 'x'"),
    letter(3, reason="HTTP 529 overloaded"),
    letter(4, topic="", payload=b""),
    letter(5),
]


def ids(selection_items: list[Letter]) -> list[str]:
    return [item.id for item in selection_items]


def test_everything_redrivable_and_new_goes_oldest_first() -> None:
    selection = select(LETTERS, set(), RedriveFilter())
    assert ids(selection.chosen) == ["0:1", "0:2", "0:3", "0:5"]
    assert (selection.already, selection.unredrivable) == (0, 1)


def test_a_dead_letter_redriven_before_is_never_chosen_again() -> None:
    selection = select(LETTERS, {"0:1", "0:3"}, RedriveFilter())
    assert ids(selection.chosen) == ["0:2", "0:5"] and selection.already == 2


def test_stage_reason_since_and_limit_filter() -> None:
    assert ids(select(LETTERS, set(), RedriveFilter(stage="store")).chosen) == ["0:2"]
    assert ids(select(LETTERS, set(), RedriveFilter(reason="http 529")).chosen) == ["0:3"]
    assert ids(select(LETTERS, set(), RedriveFilter(since=NOW - timedelta(hours=7))).chosen) == ["0:3", "0:5"]
    assert ids(select(LETTERS, set(), RedriveFilter(stage="extract", limit=2)).chosen) == ["0:1", "0:3"]


def test_since_reads_iso_times_and_durations() -> None:
    assert parse_since("2026-11-23T10:00:00Z", NOW) == datetime(2026, 11, 23, 10, tzinfo=UTC)
    assert parse_since("2026-11-23T10:00:00", NOW) == datetime(2026, 11, 23, 10, tzinfo=UTC)
    assert parse_since("90m", NOW) == NOW - timedelta(minutes=90)
    assert parse_since("2d", NOW) == NOW - timedelta(days=2)
    with pytest.raises(RedriveError, match="neither an ISO time nor a duration"):
        parse_since("yesterday", NOW)


def test_headers_read_in_either_form() -> None:
    assert header([(ATTEMPTS_HEADER, b"2"), ("traceparent", b"x")], ATTEMPTS_HEADER) == b"2"
    assert header({ATTEMPTS_HEADER: b"3"}, ATTEMPTS_HEADER) == b"3"
    assert header(None, ATTEMPTS_HEADER) is None and header([], ATTEMPTS_HEADER) is None


def test_the_report_names_each_dead_letter_and_what_was_skipped() -> None:
    report = RedriveReport(dry_run=True, selection=select(LETTERS, {"0:1"}, RedriveFilter(stage="extract")))
    lines = report.render().splitlines()
    assert lines[0].startswith("would re-drive 0:3  extract -> memstream.snapshots  (attempts 1)  HTTP 529")
    assert lines[-1] == "would re-drive 2 dead letters; skipped 1 re-driven before, 1 without topic or bytes"

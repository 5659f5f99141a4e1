"""Reading session files: resumable offsets, line numbers, and bad content skipped and reported."""

from __future__ import annotations

import json
from pathlib import Path

from memstream.capture.reader import parse_json_document, parse_jsonl, read_jsonl, read_session

GOOD = b'{"n": 1}\n'


def test_lines_offsets_and_the_resume_point() -> None:
    data = GOOD + b"\n" + b'{"n": 2}\r\n' + b'{"n": 3'
    read = parse_jsonl(data, file="f.jsonl")
    assert [(record.line, record.offset, json.loads(record.text)["n"]) for record in read.records] == [
        (1, 9, 1),
        (3, 20, 2),
    ]
    assert (read.offset, read.line, read.problems) == (20, 4, [])
    assert [record.start for record in read.records] == [0, 10]  # where each record's line begins


def test_resuming_from_an_offset_numbers_lines_from_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(GOOD + b'{"n": 2}\n' + b'{"n": 3')
    first = read_jsonl(path)
    assert [record.line for record in first.records] == [1, 2] and first.offset == 18
    with path.open("ab") as handle:
        handle.write(b"}\n" + b'{"n": 4}\n')
    second = read_jsonl(path, offset=first.offset, line=first.line)
    assert [(record.line, json.loads(record.text)["n"]) for record in second.records] == [(3, 3), (4, 4)]
    assert second.offset == path.stat().st_size and second.line == 5


def test_invalid_json_and_utf8_are_skipped_and_reported_with_their_line() -> None:
    data = GOOD + b"{not json\n" + b'{"t": "\xff\xfe"}\n' + b"   \n" + GOOD
    read = parse_jsonl(data, file="/x/s.jsonl")
    assert [record.line for record in read.records] == [1, 5]
    assert [(problem.file, problem.line) for problem in read.problems] == [("/x/s.jsonl", 2), ("/x/s.jsonl", 3)]
    assert read.problems[0].reason.startswith("invalid JSON")
    assert read.problems[1].reason.startswith("invalid UTF-8")
    assert read.offset == len(data)


def test_a_half_written_last_line_is_not_consumed_unless_the_file_is_final() -> None:
    data = GOOD + b'{"half": tr'
    live = parse_jsonl(data, file="f")
    assert (live.offset, live.problems) == (len(GOOD), [])
    final = parse_jsonl(data, file="f", final=True)
    assert [(problem.line, problem.reason) for problem in final.problems] == [(2, "half-written last line")]
    assert final.offset == len(data)
    complete_without_newline = parse_jsonl(GOOD + GOOD.rstrip(), file="f", final=True)
    assert [record.line for record in complete_without_newline.records] == [1, 2]


def test_a_conversation_document_gives_its_metadata_then_each_message_with_its_line() -> None:
    document = {"sessionId": "s1", "projectHash": "ab", "messages": [{"id": "m1"}, {"id": "m2", "content": "é"}]}
    data = json.dumps(document, indent=2, ensure_ascii=False).encode()
    read = parse_json_document(data, file="session-1.json")
    assert [json.loads(record.text) for record in read.records] == [
        {"sessionId": "s1", "projectHash": "ab"},
        {"id": "m1"},
        {"id": "m2", "content": "é"},
    ]
    assert [record.line for record in read.records] == [1, 5, 8]
    assert read.records[-1].offset == data.index(b"}\n  ]") + 1
    assert data[read.records[-1].start :].startswith(b'{\n      "id": "m2"')
    assert read.offset == len(data) and read.problems == []


def test_a_checkpoint_document_and_a_legacy_bare_list() -> None:
    history = [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "hello"}]}]
    saved = parse_json_document(json.dumps({"history": history}).encode(), file="checkpoint-a.json")
    assert [json.loads(record.text) for record in saved.records] == [{}, *history]
    legacy = parse_json_document(json.dumps(history, indent=2).encode(), file="checkpoint-b.json")
    assert [json.loads(record.text) for record in legacy.records] == history
    assert [record.line for record in legacy.records] == [2, 10]


def test_a_damaged_document_is_reported_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "session-x.json"
    path.write_text('{\n  "sessionId": "s",\n  "messages": [\n    {"id": "m1"},\n    {"id": ')
    read = read_session(path)
    assert read.records == [] and read.offset == 0
    assert len(read.problems) == 1 and read.problems[0].reason.startswith("invalid JSON document")
    bad_bytes = parse_json_document(b'{"a": "\xff"}', file="f.json")
    assert bad_bytes.records == [] and bad_bytes.problems[0].reason == "invalid UTF-8"

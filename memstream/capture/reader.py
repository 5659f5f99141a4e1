"""Read a session file from a byte offset into records, the problems met, and where the next read starts.

Two shapes exist on disk:

- JSONL (Claude Code, Codex, Kimi, Gemini CLI's current ``session-*.jsonl``): one JSON value a line, appended
  while the CLI runs. A last line without its newline is the CLI still writing: it is left for the next read
  (the resume offset stops before it) and is not a problem, unless the caller says the file is final, in
  which case it is read if it parses and reported as half-written if not. Blank lines are skipped silently;
  invalid UTF-8 and invalid JSON are skipped and reported with file:line. Bad content never raises.
- One JSON document (Gemini CLI's older ``session-*.json`` and its ``checkpoint-*.json``): the whole file is
  read at once. Its records are the document's top-level fields without the message list (one record,
  line 1, so an adapter sees the session id and project hash exactly as in the JSONL format's first line),
  then one record per message, each with the line where it starts. ``messages`` holds them in a
  conversation record, ``history`` in a ``/chat save`` checkpoint, and a legacy checkpoint is the bare list.

Only I/O errors of the file itself (missing, unreadable) raise ``OSError``; the caller decides about those.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from memstream.capture.model import Problem, RawRecord

#: The keys of a single-JSON document that hold its messages, in the order they are looked for.
DOCUMENT_MESSAGE_KEYS = ("messages", "history")

_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\r\n"


@dataclass(slots=True)
class Read:
    """What one read of a session file produced.

    ``offset`` is where a resumed read must start (bytes), ``line`` the 1-based number of the line that
    starts there; pass both back to :func:`read_jsonl` to continue.
    """

    records: list[RawRecord] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    offset: int = 0
    line: int = 1


def read_session(path: Path, *, offset: int = 0, line: int = 1, final: bool = False) -> Read:
    """Read ``path`` by its shape: a ``.json`` file is one document (always read whole), anything else JSONL."""
    if path.suffix == ".json":
        return read_json_document(path)
    return read_jsonl(path, offset=offset, line=line, final=final)


def read_jsonl(path: Path, *, offset: int = 0, line: int = 1, final: bool = False) -> Read:
    """Read the JSONL file ``path`` from byte ``offset``, whose line number is ``line``."""
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read()
    return parse_jsonl(data, file=str(path), offset=offset, line=line, final=final)


def parse_jsonl(data: bytes, *, file: str, offset: int = 0, line: int = 1, final: bool = False) -> Read:
    """Split ``data`` (the file's bytes from ``offset``) into records; pure, for tests and callers with bytes."""
    result = Read(offset=offset, line=line)
    position = 0
    while position < len(data):
        newline = data.find(b"\n", position)
        complete = newline != -1
        if not complete and not final:
            break  # the CLI is still writing this line: leave it for the next read
        end = newline + 1 if complete else len(data)
        chunk = data[position:end]
        record_offset = offset + end
        _take_line(
            chunk,
            file=file,
            line=result.line,
            start=offset + position,
            offset=record_offset,
            complete=complete,
            into=result,
        )
        result.offset = record_offset
        result.line += 1 if complete else 0
        position = end
    return result


def _take_line(chunk: bytes, *, file: str, line: int, start: int, offset: int, complete: bool, into: Read) -> None:
    raw = chunk.rstrip(b"\r\n")
    if not raw.strip():
        return
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        into.problems.append(Problem(file, line, f"invalid UTF-8 at byte {error.start} of the line"))
        return
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        reason = "half-written last line" if not complete else f"invalid JSON: {error.msg} (column {error.colno})"
        into.problems.append(Problem(file, line, reason))
        return
    except RecursionError:
        into.problems.append(Problem(file, line, "invalid JSON: nested too deeply"))
        return
    into.records.append(RawRecord(line=line, offset=offset, text=text, start=start))


def read_json_document(path: Path) -> Read:
    """Read the single-JSON session file ``path`` whole."""
    return parse_json_document(path.read_bytes(), file=str(path))


def parse_json_document(data: bytes, *, file: str) -> Read:
    """Split one JSON document into a metadata record and one record per message; pure."""
    result = Read(offset=0, line=1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        result.problems.append(Problem(file, _line_at(data, error.start), "invalid UTF-8"))
        return result
    try:
        spans = _document_spans(text)
    except (ValueError, RecursionError) as error:
        # A document being rewritten, or damaged: nothing in it can be trusted, and it is read again whole
        # the next time it changes, so the resume offset stays at 0.
        result.problems.append(
            Problem(file, _line_of(text, getattr(error, "pos", 0)), f"invalid JSON document: {error}")
        )
        return result
    lines = _LineCounter(text)
    for start, end, record_text in spans:
        byte_start = lines.byte_offset(start)
        result.records.append(
            RawRecord(line=lines.line(start), offset=lines.byte_offset(end), text=record_text, start=byte_start)
        )
    result.offset = len(data)
    result.line = text.count("\n") + 1
    return result


def _document_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of the metadata record and of each message, by character position."""
    position = _skip(text, 0)
    if position < len(text) and text[position] == "[":
        return _array_spans(text, position)  # a legacy checkpoint: the bare list of messages
    document, end = _DECODER.raw_decode(text, position)
    if _skip(text, end) != len(text):
        raise ValueError(f"extra data after the document at character {end}")
    if not isinstance(document, dict):
        raise ValueError("the document is neither an object nor a list")
    key = next((k for k in DOCUMENT_MESSAGE_KEYS if isinstance(document.get(k), list)), None)
    metadata = {k: v for k, v in document.items() if k != key}
    spans = [(position, position, json.dumps(metadata, ensure_ascii=False))]
    if key is not None:
        spans.extend(_array_spans(text, _value_position(text, position, key)))
    return spans


def _value_position(text: str, position: int, wanted: str) -> int:
    """The position of the value of the top-level key ``wanted`` in the object starting at ``position``."""
    position = _skip(text, position + 1)
    while position < len(text) and text[position] != "}":
        key, position = _DECODER.raw_decode(text, position)
        position = _skip(text, position)
        position = _skip(text, position + 1)  # the colon
        if key == wanted:
            return position
        _, position = _DECODER.raw_decode(text, position)
        position = _skip(text, position)
        if position < len(text) and text[position] == ",":
            position = _skip(text, position + 1)
    raise ValueError(f"key {wanted!r} not found")


def _array_spans(text: str, position: int) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    position = _skip(text, position + 1)
    while position < len(text) and text[position] != "]":
        _, end = _DECODER.raw_decode(text, position)
        spans.append((position, end, text[position:end]))
        position = _skip(text, end)
        if position < len(text) and text[position] == ",":
            position = _skip(text, position + 1)
    return spans


def _skip(text: str, position: int) -> int:
    while position < len(text) and text[position] in _WHITESPACE:
        position += 1
    return position


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _line_at(data: bytes, position: int) -> int:
    return data.count(b"\n", 0, position) + 1


class _LineCounter:
    """Line numbers and byte offsets of increasing character positions, without rescanning the text."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._line_position = 0
        self._line = 1
        self._byte_position = 0
        self._bytes = 0

    def line(self, position: int) -> int:
        if position < self._line_position:  # positions only grow, except the metadata record's
            return _line_of(self._text, position)
        self._line += self._text.count("\n", self._line_position, position)
        self._line_position = position
        return self._line

    def byte_offset(self, position: int) -> int:
        if position < self._byte_position:
            return len(self._text[:position].encode("utf-8"))
        self._bytes += len(self._text[self._byte_position : position].encode("utf-8"))
        self._byte_position = position
        return self._bytes

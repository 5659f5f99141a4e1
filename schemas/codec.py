"""Encoders and decoders, built once (msgspec perf tip), for events and stored memories."""

from __future__ import annotations

from typing import Any

import msgspec

from memstream.schemas.events import AnyEvent, TurnV1, upgrade_turn
from memstream.schemas.history import HistoryRecord
from memstream.schemas.memory import Memory
from memstream.schemas.state import AnyState

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent | HistoryRecord | AnyState)


class DecodeError(ValueError):
    """A payload is not a valid memstream event; the message says why."""


def encode(event: msgspec.Struct) -> bytes:
    """Encode any event or memory as JSON bytes (the tag names its schema and version)."""
    return _encoder.encode(event)


def decode(data: bytes) -> AnyEvent | HistoryRecord | AnyState:
    """Decode JSON bytes into the event or state its ``schema`` tag names, or raise DecodeError.

    An older version the pipeline no longer handles as such is upgraded: ``turn.v1`` comes back
    as a :class:`~memstream.schemas.events.Turn`.
    """
    try:
        decoded = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise DecodeError(str(exc)) from None
    return upgrade_turn(decoded) if isinstance(decoded, TurnV1) else decoded


def memory_to_payload(memory: Memory) -> dict[str, Any]:
    """A memory as a JSON-safe dict, the form the vector store keeps as payload."""
    payload: dict[str, Any] = msgspec.to_builtins(memory)
    # Superseded state as a keyword: filters on it are exact in both Qdrant backends
    # (qdrant-edge-py 0.9 turns MatchValue(False) into MatchValue(0), matching no bool).
    payload["status"] = "active" if memory.superseded_by is None else "superseded"
    return payload


def memory_from_payload(payload: dict[str, Any]) -> Memory:
    """The inverse of :func:`memory_to_payload`."""
    fields = {k: v for k, v in payload.items() if k != "status"}
    fields.setdefault("schema", "memory.v1")
    return msgspec.convert(fields, Memory)

"""The one Faust codec: memstream events in and out of Kafka as msgspec JSON."""

from __future__ import annotations

from typing import Any

from faust.serializers import codecs

from memstream.schemas import decode, encode

CODEC_NAME = "memstream"


class MsgspecCodec(codecs.Codec):
    """Encodes any schemas Struct; decodes by the ``schema`` tag (raises on anything else)."""

    def _dumps(self, obj: Any) -> bytes:
        return encode(obj)

    def _loads(self, s: bytes) -> Any:
        return decode(s)


def register_codec() -> None:
    """Make ``value_serializer="memstream"`` available to Faust (idempotent)."""
    codecs.register(CODEC_NAME, MsgspecCodec())

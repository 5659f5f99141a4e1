"""The Kafka headers memstream itself sets on events, declared beside the topics that carry them.

A re-driven dead letter (``memstream redrive``, ``memstream.ops.redrive``) goes back to its topic with
two headers, which every stage (``memstream.agents.base``) reads when the event fails again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: Kafka header of a re-driven event: times it was dead-lettered before (ASCII digits).
ATTEMPTS_HEADER = "memstream-dead-letter-attempts"
#: Kafka header of a re-driven event: the id of the dead letter it was re-driven from.
REDRIVEN_FROM_HEADER = "memstream-redriven-from"


def header(headers: Mapping[str, bytes] | Iterable[tuple[str, bytes]] | None, name: str) -> bytes | None:
    """The value of one Kafka header, whichever form (mapping or pairs) the client gave."""
    if not headers:
        return None
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    for key, value in pairs:
        if key == name:
            return value
    return None

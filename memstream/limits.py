"""Every size limit of the pipeline, chosen together so that no record is too large for the
next hop (see the README's "Size limits").

- A record memstream produces is at most ``RECORD_MAX_BYTES``: the producers' max request
  size (Faust's and memstream's own), under Kafka's default ``message.max.bytes`` (1 MiB +
  12 bytes); Tansu 0.6 in memory has no lower limit.
- The consumers fetch up to ``FETCH_PARTITION_MAX_BYTES`` per partition, more than any
  record, so one large record never needs a second fetch size (Kafka would return it
  anyway, as the first record of a fetch).
- A turn's content is cut to ``TURN_CONTENT_MAX_CHARS`` when it is published (4 bytes a
  character at worst still fits a record); the snapshot stage keeps at most
  ``MEMSTREAM_MESSAGE_MAX_CHARS`` of each message in its table state, and at most
  8 + ``REDELIVERY_KEEP`` messages per session, so no table write approaches the limit.
- A dead letter keeps the first ``DEAD_LETTER_PAYLOAD_MAX_BYTES`` of the original payload,
  with its size and where the whole record is (topic, partition, offset): a record too
  large to process is still small enough to dead-letter.
"""

from __future__ import annotations

RECORD_MAX_BYTES = 1_000_000
FETCH_PARTITION_MAX_BYTES = 4 * 1024 * 1024
TURN_CONTENT_MAX_CHARS = 200_000
DEAD_LETTER_PAYLOAD_MAX_BYTES = 64 * 1024
DEAD_LETTER_REASON_MAX_CHARS = 2_000

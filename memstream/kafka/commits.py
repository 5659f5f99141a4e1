"""Which offset of a partition may be committed: only past events that were processed.

Faust commits, per partition, the run of acked offsets it finds, and three of its rules let
that run pass an event no stage has processed yet (faust-streaming 0.15.3,
``faust/transport/consumer.py``); a worker killed after such a commit never sees that event
again, and whatever it would have become is lost with nothing dead-lettered:

1. ``_new_offset`` refuses a run that does not start at the committed offset only when the
   distance is more than one, so with offset C unacked and C+1 acked it commits C+2; and it
   skips that check when the committed offset is 0 or unknown (a partition never committed):
   then any acked run is committed, whatever lies before it. Stages that ack out of order
   (extract, whose sessions wait on the LLM side by side) or ahead of a rebalance's seek meet
   both.
2. A stream acks an event it *skips* -- one fetched before a rebalance (its generation is
   not the consumer's any more) or while flow control is off -- as if it had processed it;
   the event is fetched again after the seek, but its offset is already acked, so with (1)
   the commit can pass it before the new generation processes it.
3. A hole in the fetched offsets is recorded as a "gap" that counts as acked. The holes come
   from Faust's own read offsets, which race with seeks: ``perform_seek`` sets them back to the
   committed offset after the seek began, so events delivered (and skipped) meanwhile look like a
   hole once the next batch arrives (``bench.faults.chaos`` traced 51 lost exchanges to one such "gap" of
   280 offsets on a turns partition, committed past).

:func:`committable` is the rule memstream applies instead: the commit moves only over a run
of processed offsets that starts exactly where this assignment started reading. The consumer in
:mod:`memstream.kafka.transport` takes "processed" from the stages themselves (``agents.base``
marks an event finished once handled or dead-lettered), never from Faust's acks, and counts no
gaps; an offset the commit is held at while later ones are finished, and that no stage holds, is
read again (it was passed over: nothing else would fetch it). Faust flushes the producer before it
commits, so every output of a committed event is on its topic first; a stage that records an
event as done in a table waits until its outputs are on the broker (``agents.base.delivered``).
"""

from __future__ import annotations

from collections.abc import Iterable


def committable(acked: Iterable[int], floor: int | None, never_delivered: Iterable[int] = ()) -> int | None:
    """The offset to commit (the next one to read), or None to commit nothing yet.

    ``acked``: offsets of events that were processed. ``floor``: the first offset this
    assignment reads (the committed offset, or where the consumer started when none was
    committed); None when it is not known yet, and then nothing is committed.
    ``never_delivered``: offsets the broker skipped (no event to process).
    """
    if floor is None:
        return None
    done = {offset for offset in acked if offset >= floor}
    done.update(offset for offset in never_delivered if offset >= floor)
    end = floor
    while end in done:
        end += 1
    return end if end > floor else None

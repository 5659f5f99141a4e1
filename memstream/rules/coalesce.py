"""Raw mode's refreshes of one exchange, taken together (issue 37: a long exchange cost one embedding per
message).

Every message of an exchange that goes on makes a fact holding the whole exchange so far, under the
exchange's id (``Fact.exchange_id``), and each refreshed the exchange's one memory in place: an embedding
and a store write per message, though only the newest text is kept. A later fact of the same exchange
holds everything an earlier one holds and what was said since (its final reply included), so of the facts
of one exchange that wait together, only the newest needs embedding and storing: the memory ends up with
the same text, and the refresh costs one embedding per batch instead of one per message.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstream.schemas import Fact


def newest_of_each_exchange(facts: Sequence[Fact]) -> list[bool]:
    """Per fact of a batch (in the order they arrived), whether it is embedded: every fact that is not a
    raw exchange's, and of each exchange (its scope and ``exchange_id``) only the last that arrived."""
    last: dict[tuple[str, str], int] = {}
    for index, fact in enumerate(facts):
        if fact.exchange_id:
            last[(fact.scope_key, fact.exchange_id)] = index
    return [
        not fact.exchange_id or last[(fact.scope_key, fact.exchange_id)] == index for index, fact in enumerate(facts)
    ]

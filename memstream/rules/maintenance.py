"""Pipeline v2's maintenance worker, as pure functions: diagnostics and their composite score,
recommendations, per-action rate limits, and the halt tracker.

The measurements come in as numbers (``memstream.ops.maintenance`` reads them from Kafka and the
store); everything decided from them is here, so it is tested without a broker or a store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

import msgspec

Action = Literal["requeue_dead_letters", "repair_sparse_vectors", "repair_indexes", "retention_sweep", "reembed"]
ACTIONS: Final[tuple[str, ...]] = Action.__args__  # type: ignore[attr-defined]

#: Pipeline v2: dead letters are re-driven once their rate exceeds 1%.
DEAD_RATE_THRESHOLD: Final = 0.01
#: Pipeline v2: a retention sweep is triggered once tombstones exceed 30% of the memories.
TOMBSTONE_THRESHOLD: Final = 0.30
#: Pipeline v2: an action is halted after this many consecutive runs that did not improve health.
HALT_AFTER: Final = 3
#: How much each part weighs in the composite score (they sum to 1).
WEIGHTS: Final[Mapping[str, float]] = {
    "dead_letters": 0.20,
    "parked": 0.05,
    "lag": 0.05,
    "stuck": 0.10,
    "sparse": 0.15,
    "dense": 0.15,
    "indexes": 0.10,
    "tombstones": 0.20,
}
#: A dead-letter rate of this much or more scores 0 for that part.
DEAD_RATE_ZERO: Final = 0.10
#: A parked backlog, or a consumer lag, of this many records or more scores 0 for that part.
PARKED_ZERO: Final = 1_000
LAG_ZERO: Final = 10_000
#: Payload indexes a memory collection should have (the store's MEMORY_INDEXES).
EXPECTED_INDEXES: Final = 5


class QueueHealth(msgspec.Struct, frozen=True, kw_only=True):
    """The pipeline's topics as the maintenance worker found them."""

    #: Records on the topics the stages consume: the events the pipeline has been given.
    events: int = 0
    #: Dead letters not re-driven yet (and that a re-drive can send back).
    dead_letters: int = 0
    #: Parked snapshots not yet taken back by the park agent.
    parked_backlog: int = 0
    #: Records the stages have yet to read, over every partition.
    consumer_lag: int = 0
    #: ``topic:partition`` with records waiting and a committed offset that did not move since
    #: the previous cycle.
    stuck_partitions: list[str] = []

    @property
    def dead_rate(self) -> float:
        return self.dead_letters / self.events if self.events else (1.0 if self.dead_letters else 0.0)


class StoreHealth(msgspec.Struct, frozen=True, kw_only=True):
    """The memory store's indexes and storage (``MemoryStore.index_health``)."""

    memories: int = 0
    superseded: int = 0
    missing_sparse: int = 0
    missing_dense: int = 0
    missing_indexes: list[str] = []

    @property
    def tombstone_ratio(self) -> float:
        return self.superseded / self.memories if self.memories else 0.0


class Diagnostics(msgspec.Struct, frozen=True, kw_only=True):
    """Pipeline v2's DiagnosticsReport: queue, index and storage health, and their composite score."""

    queue: QueueHealth
    store: StoreHealth
    #: Each part's score in [0, 1], by the names of :data:`WEIGHTS`.
    parts: dict[str, float]
    #: The weighted sum of the parts, in [0, 1]; 1 is perfectly healthy.
    score: float


class Recommendation(msgspec.Struct, frozen=True):
    action: Action
    reason: str


def _falling(value: float, zero_at: float) -> float:
    """1 at 0, falling linearly to 0 at ``zero_at`` and beyond."""
    return max(0.0, 1.0 - value / zero_at)


def _covered(missing: int, total: int) -> float:
    return 1.0 - min(missing, total) / total if total else 1.0


def diagnose(queue: QueueHealth, store: StoreHealth) -> Diagnostics:
    """The report, with each part scored in [0, 1] and the composite score their weighted sum."""
    parts = {
        "dead_letters": _falling(queue.dead_rate, DEAD_RATE_ZERO),
        "parked": _falling(queue.parked_backlog, PARKED_ZERO),
        "lag": _falling(queue.consumer_lag, LAG_ZERO),
        "stuck": 1.0 / (1.0 + len(queue.stuck_partitions)),
        "sparse": _covered(store.missing_sparse, store.memories),
        "dense": _covered(store.missing_dense, store.memories),
        "indexes": _covered(len(store.missing_indexes), EXPECTED_INDEXES),
        # Healthy up to the sweep threshold, then falling to 0 when every memory is a tombstone.
        "tombstones": 1.0 - max(0.0, store.tombstone_ratio - TOMBSTONE_THRESHOLD) / (1.0 - TOMBSTONE_THRESHOLD),
    }
    score = sum(WEIGHTS[name] * value for name, value in parts.items())
    return Diagnostics(queue=queue, store=store, parts=parts, score=round(min(1.0, max(0.0, score)), 6))


def recommend(report: Diagnostics) -> list[Recommendation]:
    """Pipeline v2's buildRecommendations, for what memstream can repair."""
    queue, store = report.queue, report.store
    found: list[Recommendation] = []
    if queue.dead_rate > DEAD_RATE_THRESHOLD:
        found.append(
            Recommendation(
                "requeue_dead_letters",
                f"dead-letter rate {queue.dead_rate:.2%} > {DEAD_RATE_THRESHOLD:.0%} "
                f"({queue.dead_letters} of {queue.events} events)",
            )
        )
    if store.missing_sparse:
        found.append(Recommendation("repair_sparse_vectors", f"{store.missing_sparse} memories without BM25 terms"))
    if store.missing_indexes:
        found.append(Recommendation("repair_indexes", f"missing payload indexes: {', '.join(store.missing_indexes)}"))
    if store.tombstone_ratio > TOMBSTONE_THRESHOLD:
        found.append(
            Recommendation(
                "retention_sweep",
                f"tombstones {store.tombstone_ratio:.1%} > {TOMBSTONE_THRESHOLD:.0%} "
                f"({store.superseded} of {store.memories} memories)",
            )
        )
    if store.missing_dense:
        found.append(Recommendation("reembed", f"{store.missing_dense} memories without their embedding"))
    return found


class Limit(msgspec.Struct, frozen=True):
    """How often an action may run: at least ``cooldown`` seconds apart, at most ``hourly_budget`` an hour."""

    cooldown: float
    hourly_budget: int


def refusal(runs: Sequence[float], now: float, limit: Limit) -> str | None:
    """Why the action may not run ``now`` (epoch seconds) given its previous ``runs``, or None."""
    if runs and now - max(runs) < limit.cooldown:
        return f"cooldown: last run {now - max(runs):.0f}s ago, {limit.cooldown:.0f}s needed"
    if sum(1 for at in runs if now - at < 3600.0) >= limit.hourly_budget:
        return f"hourly budget of {limit.hourly_budget} runs spent"
    return None


def recent(runs: Sequence[float], now: float) -> list[float]:
    """The runs still inside the last hour: all a limiter needs to keep."""
    return [at for at in runs if now - at < 3600.0]


class HaltTracker(msgspec.Struct, frozen=True):
    """Pipeline v2's halt tracker: consecutive non-improving runs per action, and the halted actions."""

    misses: dict[str, int] = {}
    halted: list[str] = []


def record_run(tracker: HaltTracker, action: str, improved: bool) -> HaltTracker:
    """A run of ``action`` improved the health score or did not; the third miss in a row halts it."""
    misses = dict(tracker.misses)
    misses[action] = 0 if improved else misses.get(action, 0) + 1
    halted = list(tracker.halted)
    if misses[action] >= HALT_AFTER and action not in halted:
        halted.append(action)
    return HaltTracker(misses=misses, halted=halted)


def reset(tracker: HaltTracker) -> HaltTracker:
    """A cycle with nothing to recommend: health is good, every action gets a clean slate."""
    return HaltTracker()


def stuck_partitions(
    previous: Mapping[str, int] | None, committed: Mapping[str, int], ends: Mapping[str, int]
) -> list[str]:
    """Partitions with records waiting whose committed offset has not moved since ``previous``
    (the last cycle's); none on a first cycle."""
    if previous is None:
        return []
    return sorted(
        tp for tp, offset in committed.items() if ends.get(tp, 0) > offset and tp in previous and previous[tp] == offset
    )

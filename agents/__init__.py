"""The stream agents, one module each: snapshot → extract → embed → decide → store,
age, contradiction and graph reacting to what the store changed, and the consolidation spec's two phases:
rollout (Phase 1, per idle session) and consolidate (Phase 2, one global run at a time);
retention's timer, the document agent (Pipeline v2's document ingest) and the maintenance worker's timer.

Each module exposes ``register(app, topics, providers)``, which declares its table and
its agent on the app. Agent bodies decode, call a pure rule from ``memstream.rules``,
and send the results; an event they cannot process goes to the dead-letter topic.
"""

from memstream.agents import (
    age,
    consolidate,
    contradiction,
    decide,
    document,
    embed,
    extract,
    forget,
    graph,
    history,
    maintenance,
    park,
    retention,
    rollout,
    snapshot,
    store,
)

#: In pipeline order.
ALL_AGENTS = (
    snapshot,
    extract,
    park,
    embed,
    decide,
    store,
    history,
    age,
    contradiction,
    graph,
    rollout,
    consolidate,
    retention,
    forget,
    document,
    maintenance,
)

__all__ = ["ALL_AGENTS"]

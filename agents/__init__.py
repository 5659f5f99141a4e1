"""The stream agents, one module each: snapshot → extract → embed → dedup → store,
and age and contradiction reacting to what the store changed.

Each module exposes ``register(app, topics, providers)``, which declares its table and
its agent on the app. Agent bodies decode, call a pure rule from ``memstream.rules``,
and send the results; an event they cannot process goes to the dead-letter topic.
"""

from agents import age, contradiction, dedup, embed, extract, park, snapshot, store

#: In pipeline order.
ALL_AGENTS = (snapshot, extract, park, embed, dedup, store, age, contradiction)

__all__ = ["ALL_AGENTS"]

"""The maintenance worker's interval starts only with autonomousEnabled and without autonomousFrozen;
its tick() is there either way (Pipeline v2)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import faust
import pytest

from memstream.agents import maintenance
from memstream.ops.maintenance import Maintenance
from memstream.settings import Settings
from memstream.topics.binding import bind_topics


@pytest.mark.parametrize(
    ("enabled", "frozen", "timers"),
    [(False, False, 0), (True, True, 0), (False, True, 0), (True, False, 1)],
)
def test_the_interval_is_gated_and_tick_is_always_callable(enabled: bool, frozen: bool, timers: int) -> None:
    settings = Settings.from_env({}, autonomous_enabled=enabled, autonomous_frozen=frozen, topic_prefix="gate")
    app = faust.App("gate", broker="kafka://127.0.0.1:19092,kafka://127.0.0.1:19093", autodiscover=False)
    topics = bind_topics(app, settings.topic_prefix, settings.partitions)
    providers: Any = SimpleNamespace(settings=settings)
    worker = maintenance.register(app, topics, providers, sink=None)  # type: ignore[arg-type]
    assert isinstance(worker, Maintenance) and app.maintenance is worker  # type: ignore[attr-defined]
    assert (worker.bootstrap, worker.group) == ("127.0.0.1:19092,127.0.0.1:19093", "gate")
    assert len(app._app_tasks) == timers

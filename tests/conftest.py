"""Shared test set-up: one in-memory span exporter for the whole run, unique settings per test."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memstream.kafka.broker import free_port
from memstream.settings import Settings
from memstream.telemetry.tracing import configure_tracing
from tests.support.loops import bound_loop_teardown

#: The test folders from the longest-running files to the shortest. With ``-n auto --dist loadfile``, files are
#: handed to workers in collection order, so starting the long ones first keeps one worker from finishing
#: a 50 s replay alone at the end while the other sits idle.
_LONGEST_FIRST = ("faults", "e2e", "tenancy", "contract", "deploy", "unit")

# A task left on a test's loop that ignores its cancellation must not hang the run (tests/support/loops.py).
bound_loop_teardown()

_EXPORTER = InMemorySpanExporter()
configure_tracing("memory", exporter=_EXPORTER)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    """Every finished span of the run so far (filter by trace or name)."""
    return _EXPORTER


def make_settings(data_dir: Path, **overrides: object) -> Settings:
    """Settings isolated from the developer's environment, with unique topics and ports.

    The API runs open on loopback (one principal, admin on every project, as ``user``):
    tests of the pipeline read it without tokens. tests/tenancy turns ``api_open`` off.
    The consumer group's session timeout is 3 s, not 6 s, so that every pipeline start joins sooner.
    """
    values: dict[str, object] = {
        "data_dir": data_dir,
        "topic_prefix": f"t{uuid.uuid4().hex[:10]}",
        "http_port": free_port(),
        "partitions": 2,
        "api_open": True,
        # Tansu holds each group join for half the session timeout: 1.5 s per pipeline start instead
        # of the default's 3 s, with the heartbeat still a third of it (memstream.worker.app.group_timeouts).
        "group_session_timeout_s": 3.0,
    }
    values.update(overrides)
    return Settings.from_env({}, **values)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def weight(item: pytest.Item) -> int:
        parts = item.path.parts
        folder = parts[parts.index("tests") + 1] if "tests" in parts else ""
        return _LONGEST_FIRST.index(folder) if folder in _LONGEST_FIRST else len(_LONGEST_FIRST)

    items.sort(key=weight)  # stable: a file's tests keep their order

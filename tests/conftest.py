"""Shared test set-up: one in-memory span exporter for the whole run, unique settings per test."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memstream.kafka.broker import free_port
from memstream.settings import Settings
from memstream.telemetry.tracing import configure_tracing
from tests.support.group import GROUP_SESSION_TIMEOUT_S
from tests.support.loops import bound_loop_teardown

ROOT = Path(__file__).resolve().parents[1]
#: The test folders from the longest-running files to the shortest (``bench`` is bench/tests). With ``-n auto
#: --dist loadfile``, files are handed to workers in collection order (``pytest_configure`` below), so starting
#: the long ones first keeps one worker from finishing a minute-long fault run alone at the end while the
#: other sits idle; the console's and recall's files each start a pipeline (and a browser), so they come
#: before the many short unit files, which even out the end.
_LONGEST_FIRST = ("faults", "e2e", "tenancy", "console", "recall", "contract", "deploy", "bench", "unit")

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
    The consumer group's session timeout is 3 s, not 6 s, so that every pipeline start joins sooner
    (tests.support.group).
    """
    values: dict[str, object] = {
        "data_dir": data_dir,
        "topic_prefix": f"t{uuid.uuid4().hex[:10]}",
        "http_port": free_port(),
        "partitions": 2,
        "api_open": True,
        "group_session_timeout_s": GROUP_SESSION_TIMEOUT_S,
    }
    values.update(overrides)
    return Settings.from_env({}, **values)


def pytest_configure(config: pytest.Config) -> None:
    """Keep the order ``pytest_collection_modifyitems`` gives. By default xdist's loadfile re-sorts the
    files by how many tests each holds, most first: the minute-long fault and end-to-end files, one or
    two tests each, all came last, and one worker ran the last of them alone while the other had
    nothing left to take (pytest-xdist's ``--loadscope-reorder``, on unless ``--no-loadscope-reorder``)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def weight(item: pytest.Item) -> int:
        try:
            parts = item.path.relative_to(ROOT).parts
        except ValueError:
            parts = ()
        folder = parts[1] if parts[:1] == ("tests",) and len(parts) > 2 else parts[0] if parts else ""
        return _LONGEST_FIRST.index(folder) if folder in _LONGEST_FIRST else len(_LONGEST_FIRST)

    items.sort(key=weight)  # stable: a file's tests keep their order

"""The forgotten ledger as each worker keeps it, and when a session's window is stale."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from memstream.identity import project_key, user_key
from memstream.intake.forget import forget_event
from memstream.kafka.ledger import ForgottenLedger, ledger_of, stale_window

T = datetime(2026, 11, 23, tzinfo=UTC)


def test_the_ledger_keeps_the_latest_forget_of_each_scope() -> None:
    ledger = ForgottenLedger()
    assert ledger.latest(project_key("/a"), user_key("u@x")) is None
    ledger.record(forget_event(project="/a", at=T))
    ledger.record(forget_event(project="/a", at=T - timedelta(days=1)))  # an older one read later
    ledger.record(forget_event(user="u@x", at=T + timedelta(hours=1)))
    assert ledger.latest(project_key("/a")) == T
    assert ledger.latest(project_key("/a"), user_key("u@x")) == T + timedelta(hours=1)
    assert ledger.latest(project_key("/b"), "") is None


def test_a_window_written_before_the_forget_is_stale() -> None:
    assert not stale_window(T, None)
    assert stale_window(T, T) and stale_window(T - timedelta(seconds=1), T)
    assert not stale_window(T + timedelta(seconds=1), T)
    assert stale_window(None, T), "a window of unknown age is cleared once its scope was forgotten"


def test_a_worker_has_one_ledger_made_at_first_use() -> None:
    """The snapshot agent, the forget agent and the API's forget sink all record into the same one."""
    app = SimpleNamespace(forgotten_ledger=None)
    ledger = ledger_of(app)
    assert isinstance(ledger, ForgottenLedger) and ledger_of(app) is ledger
    ledger.record(forget_event(project="/a", at=T))
    assert ledger_of(app).latest(project_key("/a")) == T

"""The consumer group's timeouts follow MEMSTREAM_GROUP_SESSION_TIMEOUT_S: the default keeps the options
memstream always ran with, and a shorter one (the tests' 2 s) shortens the join Tansu holds."""

from __future__ import annotations

import pytest

from memstream.settings import Settings
from memstream.worker.app import CONSUMER_OPTIONS, group_timeouts


def test_the_default_session_timeout_gives_the_options_memstream_always_had() -> None:
    settings = Settings.from_env({})
    assert settings.group_session_timeout_s == 6.0
    options = group_timeouts(settings.group_session_timeout_s)
    assert options == {key: CONSUMER_OPTIONS[key] for key in options}
    assert options == {
        "broker_session_timeout": 6.0,
        "broker_rebalance_timeout": 3.0,
        "broker_heartbeat_interval": 1.0,
    }


def test_a_shorter_session_timeout_shortens_the_rebalance_and_the_heartbeat() -> None:
    settings = Settings.from_env({"MEMSTREAM_GROUP_SESSION_TIMEOUT_S": "2"})
    options = group_timeouts(settings.group_session_timeout_s)
    assert options["broker_session_timeout"] == 2.0
    assert options["broker_rebalance_timeout"] == 1.0
    # aiokafka wants the heartbeat well inside the session timeout.
    assert options["broker_heartbeat_interval"] == pytest.approx(2 / 3)


def test_a_session_timeout_below_a_second_is_refused() -> None:
    with pytest.raises(ValueError, match="MEMSTREAM_GROUP_SESSION_TIMEOUT_S"):
        Settings.from_env({"MEMSTREAM_GROUP_SESSION_TIMEOUT_S": "0.2"})

"""Fixtures of the LLM provider tests: a module names its provider in `PROVIDER`; test_llm_contract.py
parametrizes `case` over all of them instead."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the SDKs are imported only by the tests that use them
    from tests.unit.llm_clients import Provider


@pytest.fixture
def case(request: pytest.FixtureRequest) -> Provider:
    """The provider the test's module names in its ``PROVIDER``."""
    provider: Provider = request.module.PROVIDER
    return provider


@pytest.fixture
def fake(case: Provider) -> Iterator[Any]:
    """The provider's fake on loopback, started for the test and stopped after it."""
    with case.serve() as server:
        yield server


@pytest.fixture
async def make_llm(case: Provider, fake: Any) -> AsyncIterator[Callable[..., Any]]:
    """Builds clients pointed at the fake (overrides by keyword) and closes them all after the test."""
    async with case.clients(fake) as make:
        yield make

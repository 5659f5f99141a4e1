"""The tenancy suite shares the end-to-end fixtures (real broker, store, embedder), and the providers a test
opens over its own data dir (store, embedder, history) without a pipeline."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from memstream.bootstrap import build_providers
from memstream.kafka.codec import register_codec
from memstream.ports import Providers
from tests.conftest import make_settings
from tests.e2e.conftest import tmp_module_dir

__all__ = ["providers", "tmp_module_dir"]


@pytest_asyncio.fixture
async def providers(tmp_path: Path) -> AsyncIterator[Providers]:
    """The real providers over this test's data dir, opened, and closed after it (the codec registered for
    the tests that run stages)."""
    register_codec()
    built = build_providers(make_settings(tmp_path))
    await built.open()
    try:
        yield built
    finally:
        await built.close()

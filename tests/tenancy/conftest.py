"""The tenancy suite shares the end-to-end fixtures (real broker, store, embedder)."""

from tests.e2e.conftest import tmp_module_dir

__all__ = ["tmp_module_dir"]

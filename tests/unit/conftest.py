"""Fixtures the unit tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from server.base.config import StorageConfig
from server.storage import Store, open_store


@pytest.fixture
async def store(tmp_path) -> AsyncIterator[Store]:
    """The gateway's store over a real SQLite database of the test's own."""
    opened = await open_store(StorageConfig(sqlite_path=str(tmp_path / "store.db")))
    yield opened
    await opened.aclose()

"""The workers' parent processes the budget, limiter and shared-state tests start."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.unit.accounting.test_budgets_and_limits import Parents


@pytest.fixture
async def parents() -> AsyncIterator[Parents]:
    made = Parents()
    yield made
    await made.aclose()

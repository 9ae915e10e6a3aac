"""Budget alerts checked against the spend a settlement returns: a threshold is raised
from that figure, the budget is read again only where the backend did not know it, and a
check that crosses nothing starts no task. (Delivery, signing and claims across instances
are in tests/integration/storage/test_budget_alerts.py.)"""

from __future__ import annotations

import asyncio
import logging

from server.accounting.alerts import BudgetAlerts
from server.accounting.budget import MemoryBudgets, period_bounds
from server.base.caller import BudgetSpec, Principal
from server.base.config import BudgetAlertsConfig

KEY = BudgetSpec("k1", "team-a", 1.0, "monthly")
PRINCIPAL = Principal("k1", "team-a", "api")


class Budgets(MemoryBudgets):
    """Memory budgets that count how often their status is read."""

    def __init__(self, spent: float) -> None:
        async def load(key_id: str, since: float) -> float:
            return spent

        super().__init__(load)
        self.reads = 0

    async def status(self, spec: BudgetSpec) -> tuple[float, float]:
        self.reads += 1
        return await super().status(spec)


def alerts(budgets: Budgets) -> BudgetAlerts:
    return BudgetAlerts(budgets, BudgetAlertsConfig)


def raised(checker: BudgetAlerts) -> list[float]:
    return sorted(threshold for _, _, threshold in checker._raised)


async def test_a_spend_below_every_threshold_starts_nothing():
    budgets = Budgets(0.0)
    checker = alerts(budgets)
    checker.after(PRINCIPAL, [KEY], [0.49])
    assert not checker._tasks and budgets.reads == 0


async def test_the_settled_spend_raises_each_threshold_it_crossed_without_a_read(caplog):
    budgets = Budgets(0.0)
    checker = alerts(budgets)
    with caplog.at_level(logging.INFO, logger="server.accounting.alerts"):
        checker.after(PRINCIPAL, [KEY], [0.85])
        await checker.aclose()
    assert raised(checker) == [0.5, 0.8] and budgets.reads == 0
    assert [r.getMessage() for r in caplog.records] == [
        "budget alert: key 'team-a' at 50% of its monthly budget",
        "budget alert: key 'team-a' at 80% of its monthly budget",
    ]
    # Raised once a period: the same spend again starts nothing.
    checker.after(PRINCIPAL, [KEY], [0.9])
    assert not checker._tasks


async def test_a_spend_the_backend_did_not_know_is_read_again():
    budgets = Budgets(1.0)
    checker = alerts(budgets)
    checker.after(PRINCIPAL, [KEY], [None])
    await asyncio.gather(*checker._tasks)
    assert budgets.reads == 1 and raised(checker) == [0.5, 0.8, 1.0]
    start, _ = period_bounds("monthly")
    assert {(account, at) for account, at, _ in checker._raised} == {("k1", start)}

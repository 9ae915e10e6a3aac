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
    # A budget of $2: its first threshold is $1.
    checker.after(PRINCIPAL, [BudgetSpec("k2", "two", 2.0, "monthly")], [0.3])
    assert not checker._tasks and budgets.reads == 0


async def test_a_spend_exactly_at_a_threshold_crosses_it():
    checker = alerts(Budgets(0.0))
    checker.after(PRINCIPAL, [KEY], [0.5])
    await checker.aclose()
    assert raised(checker) == [0.5]


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


async def test_each_level_is_checked_when_the_one_before_stops_below_a_threshold():
    team = BudgetSpec("t1", "the team", 2.0, "daily", "team")
    budgets = Budgets(0.0)
    checker = alerts(budgets)
    # The key crosses 50% but not 80%; the team after it crosses 50% too.
    checker.after(PRINCIPAL, [KEY, team], [0.6, 1.2])
    await checker.aclose()
    # Each in its own period.
    assert sorted(checker._raised) == [
        ("k1", period_bounds("monthly")[0], 0.5),
        ("t1", period_bounds("daily")[0], 0.5),
    ]


async def test_a_level_of_its_own_thresholds_and_a_budget_of_nothing():
    team = BudgetSpec("t1", "the team", 1.0, "monthly", "team")
    free = BudgetSpec("k2", "free", 0.0, "monthly")
    checker = BudgetAlerts(Budgets(0.0), lambda: BudgetAlertsConfig(by_level={"team": [0.9]}))
    # The team alerts at 90% only; a budget of $0 has no share to cross.
    checker.after(PRINCIPAL, [KEY, team, free], [0.6, 0.6, 0.0])
    await checker.aclose()
    assert raised(checker) == [0.5]

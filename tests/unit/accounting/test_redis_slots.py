"""On a Redis Cluster each Lua script runs on one node, so all the keys one script
touches must share a hash slot: a rate-limit bucket and its tickets, and every
account one call reserves against (its organisation's levels, its team's, its key's)."""

from __future__ import annotations

from redis.crc import key_slot

from server.accounting.budget import RedisBudgets
from server.accounting.ratelimit import RedisLimiter
from server.base.caller import BudgetSpec, account_of


class _Scripts:
    def register_script(self, script: str) -> None:
        return None


def _slots(keys: list[str]) -> set[int]:
    return {key_slot(key.encode()) for key in keys}


def test_a_rate_limits_keys_share_one_slot():
    limiter = RedisLimiter(_Scripts(), "gateway:")
    for account in ("k-123", "team:t-1", "org:o-1", "member:t-1/u-1"):
        assert len(_slots(limiter._keys(account))) == 1


def test_every_account_of_one_call_shares_its_organisations_slot():
    budgets = RedisBudgets(_Scripts(), "gateway:", load_spent=None)  # type: ignore[arg-type]
    slot = account_of("org", "o-1")
    specs = [
        BudgetSpec(account_of(level, level_id), level, 1.0, period, level, level_id, slot)
        for level, level_id, period in (
            ("org", "o-1", "monthly"), ("team", "t-1", "daily"),
            ("member", "t-1/u-1", "none"), ("key", "k-123", "monthly"),
        )
    ]  # fmt: skip
    keys = [key for spec in specs for key in budgets._keys(spec, 1_769_904_000)]
    assert len(set(keys)) == len(keys) and len(_slots(keys)) == 1
    # Organisations spread over the cluster.
    other = BudgetSpec("k-9", "key", 1.0, "monthly", "key", "k-9", account_of("org", "o-2"))
    assert _slots(budgets._keys(other, 0)) != _slots(keys)


def test_a_key_without_an_organisation_keeps_its_accounts_in_its_own_slot():
    budgets = RedisBudgets(_Scripts(), "gateway:", load_spent=None)  # type: ignore[arg-type]
    team = BudgetSpec("team:t-1", "team", 1.0, "monthly", "team", "t-1", "k-123")
    own = BudgetSpec("k-123", "key", 1.0, "monthly", "key", "k-123", "k-123")
    keys = budgets._keys(team, 0) + budgets._keys(own, 0)
    assert len(set(keys)) == 4 and len(_slots(keys)) == 1

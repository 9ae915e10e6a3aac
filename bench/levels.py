"""What reserving against the levels above a key costs: one admission's reservation and
settlement against the key's budget alone, and against its organisation's, team's,
member's and its own at once, in memory and in Redis, in one run (ratios, not times,
are the figures: the machine's speed cancels out).

Run: python -m bench.levels [--redis redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from typing import Any

from server.accounting.budget import MemoryBudgets, RedisBudgets
from server.base.caller import BudgetSpec


async def nothing_spent(account: str, since: float) -> float:
    return 0.0


def specs(levels: int) -> list[BudgetSpec]:
    slot = f"org:{uuid.uuid4().hex[:8]}"
    names = ("org", "team", "member", "key")[-levels:]
    out = []
    for name in names:
        level_id = uuid.uuid4().hex[:8]
        account = level_id if name == "key" else f"{name}:{level_id}"
        out.append(BudgetSpec(account, name, 1e9, "monthly", name, level_id, slot))
    return out


async def per_call_us(budgets: Any, levels: int, calls: int) -> float:
    held = specs(levels)
    await budgets.reserve_all(held, 0.0)  # the accounts loaded
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            await budgets.settle_all(await budgets.reserve_all(held, 0.001), 0.001)
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    memory = MemoryBudgets(nothing_spent)
    one, four = await per_call_us(memory, 1, 20_000), await per_call_us(memory, 4, 20_000)
    print(f"memory: key alone {one:.1f} us, four levels {four:.1f} us, ratio {four / one:.2f}")
    from redis.asyncio import Redis

    client = Redis.from_url(args.redis)
    try:
        redis = RedisBudgets(client, f"bench-levels:{uuid.uuid4().hex[:6]}:", nothing_spent)
        one, four = await per_call_us(redis, 1, 500), await per_call_us(redis, 4, 500)
        print(f"redis:  key alone {one:.1f} us, four levels {four:.1f} us, ratio {four / one:.2f}")
        keys = [k async for k in client.scan_iter(match=f"{redis.prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())

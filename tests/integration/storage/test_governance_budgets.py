"""Budgets up the hierarchy: keys of two teams of one organisation, called through the
openai and anthropic SDKs on two workers sharing Redis (or the parent's shared state),
until the organisation's budget refuses them; the refusal names the organisation, the
budget holds within one reservation, and each level's spend is the sum of its ledger
rows."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import anthropic
import asyncpg
import httpx
import openai
import pytest

from tests.support.gateways import eventually, start_process, stop_process, write_config
from tests.support.shared_state import (
    ADMIN_KEY,
    MAX_TOKENS,
    config_with,
    redis_settings,
    reservation,
)

ADMIN = {"x-admin-key": ADMIN_KEY}
HELLO = [{"role": "user", "content": "hello"}]


async def ledger_sums(storage: dict[str, Any], column: str) -> dict[str, float]:
    """Each value of `column`'s spend: the sum of its ledger rows."""
    sql = (
        f"SELECT {column} AS level, COALESCE(SUM(total_cost_usd), 0) AS spent "
        f"FROM usage_records GROUP BY {column}"
    )
    if "database_url" in storage:
        conn = await asyncpg.connect(storage["database_url"])
        try:
            return {r["level"]: float(r["spent"]) for r in await conn.fetch(sql)}
        finally:
            await conn.close()
    with sqlite3.connect(storage["sqlite_path"]) as conn:
        return {level: float(spent) for level, spent in conn.execute(sql)}


async def ledger_rows(storage: dict[str, Any], org_id: str) -> list[tuple[str, str, str]]:
    sql = "SELECT key_id, team_id, user_id FROM usage_records WHERE org_id = '" + org_id + "'"
    if "database_url" in storage:
        conn = await asyncpg.connect(storage["database_url"])
        try:
            return [(r[0], r[1], r[2]) for r in await conn.fetch(sql)]
        finally:
            await conn.close()
    with sqlite3.connect(storage["sqlite_path"]) as conn:
        return list(conn.execute(sql))


@pytest.fixture(
    params=[
        ("sqlite", "redis"),
        ("sqlite", "workers"),
        pytest.param(("postgresql", "redis"), marks=pytest.mark.postgres),
        ("sqlite", "cluster"),
    ],
    ids=["sqlite-redis", "sqlite-shared-state", "postgresql-redis", "sqlite-redis-cluster"],
)
def storage(request: pytest.FixtureRequest, tmp_path: Path, redis_prefix: str) -> dict[str, Any]:
    database, shared = request.param
    out: dict[str, Any] = (
        {"database_url": request.getfixturevalue("pg_url")}
        if database == "postgresql"
        else {"sqlite_path": str(tmp_path / "gateway.db")}
    )
    if shared in ("redis", "cluster"):
        out |= redis_settings(request, shared, redis_prefix)
    return out


async def test_two_teams_on_two_workers_until_the_organisation_budget_refuses(
    tmp_path: Path, storage: dict[str, Any]
) -> None:
    data = config_with(**storage)
    data["operations"] = {"request_log": False}
    data["ledger"] = {"flush_interval_s": 0.05}
    each = reservation()
    limit = round(each * 12.5, 9)
    gw = start_process("--config", str(write_config(tmp_path, data)), "--workers", "2",
                       timeout_s=60)  # fmt: skip
    try:
        base = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=base, timeout=30) as admin:
            suffix = uuid.uuid4().hex[:6]
            org = (await admin.post("/v1/admin/orgs", headers=ADMIN, json={
                "name": f"acme-{suffix}", "limits": {"budget_usd": limit}})).json()["org"]  # fmt: skip
            teams = []
            for name, limits in (("search", {"budget_usd": limit * 10}), ("ads", {})):
                made = await admin.post("/v1/admin/teams", headers=ADMIN,
                                        json={"org_id": org["id"], "name": name, "limits": limits})  # fmt: skip
                teams.append(made.json()["team"])
            secrets = []
            for team in teams:
                made = await admin.post("/v1/admin/keys", headers=ADMIN,
                                        json={"name": f"{team['name']}-svc", "kind": "api",
                                              "team": team["id"]})  # fmt: skip
                secrets.append(made.json()["secret"])
            chat = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=secrets[0], max_retries=0)
            claude = anthropic.AsyncAnthropic(base_url=base, api_key=secrets[1], max_retries=0)

            async def by_openai() -> float | str:
                try:
                    reply = await chat.chat.completions.create(
                        model="sim-pro",
                        messages=HELLO,
                        max_tokens=MAX_TOKENS,  # type: ignore[arg-type]
                    )
                except openai.RateLimitError as exc:
                    return str(exc)
                return 1.0 if reply.choices else 0.0

            async def by_anthropic() -> float | str:
                try:
                    reply = await claude.messages.create(
                        model="sim-pro",
                        messages=HELLO,
                        max_tokens=MAX_TOKENS,  # type: ignore[arg-type]
                    )
                except anthropic.RateLimitError as exc:
                    return str(exc)
                return 1.0 if reply.content else 0.0

            refusals: list[str] = []
            served = 0
            for _ in range(20):  # waves of both teams at once, until both are refused
                results = await asyncio.gather(*(by_openai() for _ in range(4)),
                                               *(by_anthropic() for _ in range(4)))  # fmt: skip
                served += sum(1 for r in results if r == 1.0)
                refusals += [r for r in results if isinstance(r, str)]
                if len({r for r in results if isinstance(r, str)}) and all(
                    isinstance(r, str) for r in results
                ):
                    break
            assert refusals and served >= 10
            # The organisation's budget refused both teams' keys, naming itself and its id.
            assert all("organisation" in r and org["id"] in r for r in refusals), refusals[:2]
            await chat.close()
            await claude.close()

            async def consistent() -> tuple[list[dict[str, Any]], dict[str, Any]]:
                # Every worker's last settlements and ledger rows land in their time:
                # a row for each call, served or refused.
                assert len(await ledger_rows(storage, org["id"])) == served + len(refusals)
                teams_now = [
                    (await admin.get(f"/v1/admin/teams/{t['id']}", headers=ADMIN)).json()["team"]
                    for t in teams
                ]
                org_now = (await admin.get(f"/v1/admin/orgs/{org['id']}", headers=ADMIN)).json()[
                    "org"
                ]
                by_team = await ledger_sums(storage, "team_id")
                by_org = await ledger_sums(storage, "org_id")
                # Each level's spend is the sum of its rows, to the cent (and closer).
                for team in teams_now:
                    assert team["spent_usd"] == pytest.approx(by_team[team["id"]], abs=1e-9)
                    assert team["spent_usd"] > 0
                assert org_now["spent_usd"] == pytest.approx(by_org[org["id"]], abs=1e-9)
                return teams_now, org_now

            teams_now, org_now = await eventually(consistent)
        rows = await ledger_rows(storage, org["id"])
        assert org_now["spent_usd"] == pytest.approx(sum(t["spent_usd"] for t in teams_now))
        # The budget holds: overrun by one reservation at most.
        assert org_now["spent_usd"] <= limit + each
        assert org_now["spent_usd"] > limit - 3 * each
        # Every row of the organisation names its key's team.
        assert {team for _, team, _ in rows} == {t["id"] for t in teams}
    finally:
        output = stop_process(gw, timeout_s=60)
    assert gw.process.returncode == 0, output

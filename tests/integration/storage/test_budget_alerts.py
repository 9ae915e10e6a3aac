"""Budget alerts: a key of a team of an organisation spends its budget through two
gateways sharing PostgreSQL and Redis; each threshold crossed is POSTed once, signed, to a
loopback receiver that checks the signature, and written to the audit log. The receiver
is stopped mid-test: calls keep their pace, and the alert raised while it was down
arrives once it is back (retried with backoff)."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from aiohttp import web

from tests.support.gateways import eventually, start_process, stop_process, write_config
from tests.support.shared_state import (
    ADMIN_KEY,
    MAX_TOKENS,
    REDIS_URL,
    config_with,
    reservation,
)

ADMIN = {"x-admin-key": ADMIN_KEY}
SECRET = "alert-signing-secret-0001"
HELLO: Any = [{"role": "user", "content": "hello"}]

pytestmark = pytest.mark.postgres


class Receiver:
    """A webhook receiver on a fixed loopback port that keeps the alerts whose
    signature is right and counts the others; it can be stopped and started again."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.alerts: list[dict[str, Any]] = []
        self.forged = 0
        self._runner: web.AppRunner | None = None

    async def _hook(self, request: web.Request) -> web.Response:
        body = await request.read()
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(request.headers.get("x-gateway-signature", ""), expected):
            self.forged += 1
            return web.Response(status=401)
        alert = json.loads(body)
        assert request.headers["x-gateway-timestamp"] == str(alert["ts"])
        self.alerts.append(alert)
        return web.Response(status=204)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def at(self, threshold: float) -> list[dict[str, Any]]:
        return [a for a in self.alerts if a["threshold"] == threshold]


async def test_each_threshold_is_posted_once_signed_and_a_down_receiver_slows_nothing(
    tmp_path: Path, pg_url: str, redis_prefix: str
) -> None:
    receiver = Receiver()
    await receiver.start()
    data = config_with(database_url=pg_url, redis_url=REDIS_URL,
                       redis_prefix=f"{redis_prefix}{uuid.uuid4().hex[:6]}:")  # fmt: skip
    data["operations"] = {"request_log": False}
    data["budget_alerts"] = {
        "thresholds": [0.2, 0.6],
        "webhook_url": f"http://127.0.0.1:{receiver.port}/hook",
        "secret": SECRET,
        "backoff_s": 0.05,
        "max_attempts": 60,
        "timeout_s": 1,
    }
    path = str(write_config(tmp_path, data))
    gateways = [start_process("--config", path) for _ in range(2)]
    try:
        bases = [f"http://127.0.0.1:{gw.http_port}" for gw in gateways]
        async with httpx.AsyncClient(base_url=bases[0], timeout=30) as admin:
            suffix = uuid.uuid4().hex[:6]
            org = (await admin.post("/v1/admin/orgs", headers=ADMIN,
                                    json={"name": f"acme-{suffix}"})).json()["org"]  # fmt: skip
            team = (await admin.post("/v1/admin/teams", headers=ADMIN,
                                     json={"org_id": org["id"], "name": "search"})).json()["team"]  # fmt: skip
            made = await admin.post("/v1/admin/keys", headers=ADMIN, json={
                "name": f"alerted-{suffix}", "kind": "api", "team": team["id"],
                "budget_usd": round(reservation() * 10, 9), "budget_period": "monthly"})  # fmt: skip
            key = made.json()
            clients = [
                openai.AsyncOpenAI(base_url=f"{b}/v1", api_key=key["secret"], max_retries=0)
                for b in bases
            ]

            async def call(i: int) -> float | None:
                """One call through instance i % 2; its duration, None once refused."""
                started = time.monotonic()
                try:
                    await clients[i % 2].chat.completions.create(
                        model="sim-pro", messages=HELLO, max_tokens=MAX_TOKENS
                    )
                except openai.RateLimitError:
                    return None
                return time.monotonic() - started

            # Until the spend crosses 20%; then its alert arrives before anything else
            # is spent (however slow the delivery on a loaded machine).
            calls = 0
            while await _spent_share(admin, key["key"]["id"]) < 0.2:
                assert calls < 40, "no spend past 20%"
                await call(calls)
                calls += 1
                await eventually(_settled(admin, key["key"]["id"]), timeout_s=5)

            async def first_arrived() -> None:
                assert receiver.at(0.2)

            await eventually(first_arrived, timeout_s=20)
            assert not receiver.at(0.6)  # raised only once the receiver is down
            await receiver.stop()

            # The receiver is down: calls keep their pace until the budget refuses.
            durations = []
            while (took := await call(calls)) is not None:
                durations.append(took)
                calls += 1
                assert calls < 60, "the budget never refused"
            assert durations and max(durations) < 2.0, durations

            await receiver.start()  # back: the 60% alert, raised meanwhile, arrives

            async def both_arrived() -> None:
                assert receiver.at(0.6)

            await eventually(both_arrived, timeout_s=20)
            for client in clients:
                await client.close()
            audit = await admin.get("/v1/admin/audit", headers=ADMIN,
                                    params={"action": "budget.alert"})  # fmt: skip
            events = audit.json()["events"]
            state = await admin.get("/v1/admin/traffic", headers=ADMIN)
            raised = state.json()["budget_alerts"]
    finally:
        for gw in gateways:
            stop_process(gw)
        await receiver.stop()

    # Once each, across both instances, signed; the key's team and organisation named.
    assert len(receiver.at(0.2)) == 1 and len(receiver.at(0.6)) == 1, receiver.alerts
    assert receiver.forged == 0
    alert = receiver.at(0.6)[0]
    assert alert["level"] == "key" and alert["key"]["id"] == key["key"]["id"]
    assert alert["team"] == {"id": team["id"], "name": "search"}
    assert alert["org"]["id"] == org["id"]
    assert alert["spent_usd"] >= 0.6 * alert["budget_usd"]
    assert sorted(json.loads(e["after"])["threshold"] for e in events) == [0.2, 0.6]
    # The admin API lists the last alerts, newest first.
    assert [(a["threshold"], a["account"]) for a in raised] == [
        (0.6, key["key"]["id"]),
        (0.2, key["key"]["id"]),
    ]


async def _spent_share(admin: httpx.AsyncClient, key_id: str) -> float:
    """The share of its budget the key has spent."""
    usage = (await admin.get("/v1/usage", headers=ADMIN, params={"key_id": key_id})).json()
    budget = usage.get("budget", {})
    return float(budget.get("spent_usd", 0)) / float(budget["budget_usd"])


def _settled(admin: httpx.AsyncClient, key_id: str) -> Any:
    """Passes once the key's usage shows no reservation left (its calls settled)."""

    async def check() -> None:
        usage = (await admin.get("/v1/usage", headers=ADMIN, params={"key_id": key_id})).json()
        assert float(usage.get("budget", {}).get("reserved_usd", 0)) == 0

    return check

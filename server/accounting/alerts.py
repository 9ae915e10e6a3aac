"""Budget alerts: when a level's spend in its period crosses a share of its budget
(`budget_alerts.thresholds`, 50%, 80% and 100% by default), the gateway writes an audit
event and POSTs a signed JSON alert to `budget_alerts.webhook_url`.

Each alert is raised once per threshold and period across instances: its row in
`budget_alerts` (primary key: account, period start, threshold) is inserted in the same
transaction as its audit event, and only the instance whose insert went in sends it.
The check runs after a call's cost has settled and the delivery in tasks of its own,
so neither a slow database nor a slow or absent receiver delays any request.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import httpx
import orjson

from server.accounting.budget import Budgets, period_bounds
from server.base.caller import BudgetSpec, Principal
from server.base.config import BudgetAlertsConfig
from server.storage.alerts import AlertStore
from server.storage.audit import AuditLog

log = logging.getLogger(__name__)
SIGNATURE = "x-gateway-signature"
TIMESTAMP = "x-gateway-timestamp"
ALERT_ID = "x-gateway-alert-id"


def signature(secret: str, body: bytes) -> str:
    """The header value a receiver recomputes: HMAC-SHA256 of the body, in hex."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Webhook:
    """Delivers alerts to the configured URL, each in a task of its own: signed,
    retried with doubling backoff, at most `max_queued` under way."""

    def __init__(self, config: Callable[[], BudgetAlertsConfig]) -> None:
        self.config = config
        self._client: httpx.AsyncClient | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.delivered = 0
        self.failed = 0
        self.dropped = 0

    def send(self, alert: dict[str, Any]) -> None:
        config = self.config()
        if not config.webhook_url or not config.secret:
            return
        if len(self._tasks) >= config.max_queued:
            self.dropped += 1
            log.warning("budget alert %s dropped: %d deliveries under way", alert["id"],
                        len(self._tasks))  # fmt: skip
            return
        task = asyncio.create_task(self._deliver(config, alert))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, config: BudgetAlertsConfig, alert: dict[str, Any]) -> None:
        assert config.webhook_url and config.secret
        if self._client is None:
            self._client = httpx.AsyncClient()
        body = orjson.dumps(alert, option=orjson.OPT_SORT_KEYS)
        headers = {
            "content-type": "application/json",
            SIGNATURE: signature(config.secret, body),
            TIMESTAMP: str(alert["ts"]),
            ALERT_ID: alert["id"],
        }
        delay, why = config.backoff_s, ""
        for attempt in range(config.max_attempts):
            if attempt:
                await asyncio.sleep(delay)
                delay *= 2
            try:
                answer = await self._client.post(
                    config.webhook_url, content=body, headers=headers, timeout=config.timeout_s
                )
            except httpx.HTTPError as exc:
                why = type(exc).__name__
                continue
            if answer.status_code < 300:
                self.delivered += 1
                return
            why = f"HTTP {answer.status_code}"
        self.failed += 1
        log.warning("budget alert %s not delivered after %d attempts (%s)", alert["id"],
                    config.max_attempts, why)  # fmt: skip

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()


class BudgetAlerts:
    """Checks a call's budgets after it settled and raises the thresholds crossed."""

    def __init__(
        self,
        budgets: Budgets,
        config: Callable[[], BudgetAlertsConfig],
        store: AlertStore | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        self.budgets = budgets
        self.config = config
        self.store = store
        self.audit = audit
        self.webhook = Webhook(config)
        # (account, period start, threshold) known raised, here or elsewhere.
        self._raised: set[tuple[str, float, float]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    def after(
        self, principal: Principal, specs: Sequence[BudgetSpec], spent: Sequence[float | None]
    ) -> None:
        """Checks `specs` against each one's spend after the call's settlement (None: read
        it again); only a crossing, or a spend not known, takes a task of its own."""
        due = []
        for spec, now_spent in zip(specs, spent, strict=True):
            start, todo = self._unraised(spec)
            if todo and (now_spent is None or now_spent >= todo[0] * spec.limit_usd):
                due.append((spec, start, todo, now_spent))
        if due:
            self._spawn(self._check(principal, due))

    def _unraised(self, spec: BudgetSpec) -> tuple[float, list[float]]:
        """The start of `spec`'s period and its thresholds not raised yet, lowest first."""
        config = self.config()
        level: Any = spec.level
        shares = config.by_level.get(level, config.thresholds)
        start, _ = period_bounds(spec.period)
        if spec.limit_usd <= 0 or not shares:
            return start, []
        return start, sorted(t for t in shares if (spec.key_id, start, t) not in self._raised)

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("budget alert check failed: %r", task.exception())

    async def _check(
        self, principal: Principal, due: list[tuple[BudgetSpec, float, list[float], float | None]]
    ) -> None:
        for spec, start, todo, spent in due:
            if spent is None:
                spent, _ = await self.budgets.status(spec)
            for threshold in todo:
                if spent < threshold * spec.limit_usd:
                    break
                await self._raise(principal, spec, start, threshold, spent)

    async def _raise(
        self, principal: Principal, spec: BudgetSpec, start: float, threshold: float, spent: float
    ) -> None:
        mark = (spec.key_id, start, threshold)
        if len(self._raised) > 100_000:
            self._raised.clear()
        self._raised.add(mark)
        alert = alert_of(principal, spec, start, threshold, spent)
        if self.store is not None and self.audit is not None:
            async with self.audit.change() as tx:
                if not await self.store.claim(
                    tx, spec.key_id, start, threshold, alert["ts"], alert
                ):
                    return  # raised by another instance
                await self.audit.append(
                    tx, ts=alert["ts"], actor="gateway", actor_address="", action="budget.alert",
                    target=spec.key_id, before=None, after=alert, request_id="",
                )  # fmt: skip
        log.info("budget alert: %s %r at %g%% of its %s budget", spec.level, spec.key_name,
                 threshold * 100, spec.period)  # fmt: skip
        self.webhook.send(alert)

    async def aclose(self) -> None:
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await self.webhook.aclose()


def alert_of(
    principal: Principal, spec: BudgetSpec, start: float, threshold: float, spent: float
) -> dict[str, Any]:
    """The alert's JSON: the level and its budget, and the key whose call crossed the
    threshold with its team and organisation."""
    above = {lv.level: lv for lv in principal.levels}
    team, org = above.get("team"), above.get("org")
    return {
        "id": uuid.uuid4().hex,
        "type": "budget.threshold",
        "ts": round(time.time(), 3),
        "level": spec.level,
        "account": spec.key_id,
        "name": spec.key_name,
        "threshold": threshold,
        "spent_usd": round(spent, 9),
        "budget_usd": spec.limit_usd,
        "period": spec.period,
        "period_start": start,
        "key": {"id": principal.key_id, "name": principal.name},
        "team": {"id": team.id, "name": team.name} if team else None,
        "org": {"id": org.id, "name": org.name} if org else None,
    }

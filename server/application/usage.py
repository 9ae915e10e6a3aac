"""UsageService: a key's usage from the ledger, by day and model, and its budget."""

from __future__ import annotations

import contextlib
import time

from gateway.v1 import usage_service_pb2 as usage_pb

from server.accounting.accounts import Accounts
from server.accounting.admission import HEADER, principal_of
from server.accounting.budget import period_bounds
from server.application.admin import key_of, stored
from server.application.pipeline.state import Live
from server.base.call import Call
from server.base.caller import Principal
from server.base.config import KeyKind
from server.base.errors import InvalidArgument, PermissionDenied
from server.storage import Store
from server.storage.usage import Bucket

DEFAULT_RANGE_S = 30 * 86400
# The latest time the usage API accepts: 9999-12-31T23:59:59Z (both databases' limit
# for dates, and far past any ledger row).
MAX_TIME = 253_402_300_799


class UsageService:
    def __init__(self, live: Live, accounts: Accounts, store: Store | None) -> None:
        self.live = live
        self.accounts = accounts
        self.store = store

    async def _usage_principal(self, request: usage_pb.GetUsageRequest, call: Call) -> Principal:
        """The key whose usage is asked for: the caller's own, or with an admin key the
        key it names."""
        keys = self.live.current.keys
        # A Bearer key alone says its kind only through the key itself.
        bearer = await self.accounts.admission.keys.bearer_kind(call.metadata, keys)
        if HEADER["admin"] in call.metadata or bearer == "admin":
            admin = await self.accounts.check(call, "admin", keys)
            if not request.key_id:
                raise InvalidArgument.for_field("key_id", "is required with an admin key")
            found = keys.by_id_or_name(request.key_id)
            if found is None:
                found = principal_of(await key_of(self.store, request.key_id))
            # A team's admin key reads its team's keys only (the config's keys and the
            # gateway's admin keys are of no team).
            if admin.team_id and found.team_id != admin.team_id:
                raise PermissionDenied(
                    f"this administrator may not read key {request.key_id!r}",
                    {"key": request.key_id},
                )
            return found
        if request.key_id:
            raise InvalidArgument.for_field("key_id", "needs an admin key (x-admin-key)")
        kind: KeyKind = "router" if HEADER["router"] in call.metadata else bearer or "api"
        return await self.accounts.check(call, kind, keys)

    async def get_usage(
        self, request: usage_pb.GetUsageRequest, call: Call
    ) -> usage_pb.GetUsageResponse:
        principal = await self._usage_principal(request, call)
        end = request.end_time if request.HasField("end_time") else int(time.time()) + 1
        start = request.start_time if request.HasField("start_time") else end - DEFAULT_RANGE_S
        for name, value in (("end_time", end), ("start_time", start)):
            if not 0 <= value <= MAX_TIME:
                raise InvalidArgument.for_field(
                    name, f"must be Unix seconds between 0 and {MAX_TIME}"
                )
        if end < start:
            raise InvalidArgument.for_field("end_time", "must not be before start_time")
        # This instance's own recent requests first reach the database.
        with contextlib.suppress(Exception):
            await self.accounts.settled()
            await self.accounts.ledger.caught_up(2.0)
        rows = await stored(self.store).usage.buckets(principal.key_id, start, end)
        response = usage_pb.GetUsageResponse(
            key_id=principal.key_id, key_name=principal.name, start_time=start, end_time=end,
            total=_bucket(_sum(rows), "", ""),
            by_day_and_model=[_bucket(b, b.day, b.model) for b in rows],
        )  # fmt: skip
        for model in sorted({b.model for b in rows}):
            response.by_model.append(
                _bucket(_sum([b for b in rows if b.model == model]), "", model)
            )
        for day in sorted({b.day for b in rows}):
            response.by_day.append(_bucket(_sum([b for b in rows if b.day == day]), day, ""))
        if (spec := principal.budget) is not None:
            spent, reserved = await self.accounts.budgets.status(spec)
            response.budget.CopyFrom(
                usage_pb.BudgetStatus(
                    budget_usd=spec.limit_usd,
                    period=spec.period,
                    period_start_time=int(period_bounds(spec.period)[0]),
                    spent_usd=round(spent, 11),
                    reserved_usd=round(reserved, 11),
                    remaining_usd=round(max(0.0, spec.limit_usd - spent), 11),
                )  # fmt: skip
            )
        return response


def _bucket(b: Bucket, day: str, model: str) -> usage_pb.UsageBucket:
    return usage_pb.UsageBucket(
        day=day, model=model, requests=b.requests, errors=b.errors,
        prompt_tokens=b.prompt_tokens, completion_tokens=b.completion_tokens,
        total_tokens=b.total_tokens, cost_usd=round(b.cost_usd, 11),
        batch_requests=b.batch_requests, batch_cost_usd=round(b.batch_cost_usd, 11),
    )  # fmt: skip


def _sum(buckets: list[Bucket]) -> Bucket:
    return Bucket(
        "", "", sum(b.requests for b in buckets), sum(b.prompt_tokens for b in buckets),
        sum(b.completion_tokens for b in buckets), sum(b.total_tokens for b in buckets),
        sum(b.cost_usd for b in buckets), sum(b.errors for b in buckets),
        sum(b.batch_requests for b in buckets), sum(b.batch_cost_usd for b in buckets),
    )  # fmt: skip

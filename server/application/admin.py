"""Key management (AdminService) and usage reports (UsageService): thin handlers over
the key store, the usage ledger and the budgets."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from gateway.v1 import admin_service_pb2 as admin_pb
from gateway.v1 import usage_service_pb2 as usage_pb

from server.accounting.admission import HEADER, Admission, Principal
from server.accounting.budget import BudgetSpec, period_bounds
from server.base.call import Call
from server.base.config import KeyKind
from server.base.errors import Internal, InvalidArgument, NotFound
from server.storage.keys import KeyRecord
from server.storage.usage import Bucket

if TYPE_CHECKING:
    from server.accounting.tab import Accounts
    from server.storage import Store

KINDS = ("api", "router", "admin")
PERIODS = ("none", "daily", "monthly")
DEFAULT_RANGE_S = 30 * 86400
# The latest time the usage API accepts: 9999-12-31T23:59:59Z (both databases' limit
# for dates, and far past any ledger row).
MAX_TIME = 253_402_300_799


def key_message(key: KeyRecord) -> admin_pb.ApiKey:
    out = admin_pb.ApiKey(
        id=key.id, prefix=key.prefix, kind=key.kind, name=key.name, owner=key.owner,
        budget_period=key.budget_period, create_time=int(key.created_at), revoked=key.revoked,
    )  # fmt: skip
    if key.requests_per_minute is not None:
        out.requests_per_minute = key.requests_per_minute
    if key.tokens_per_minute is not None:
        out.tokens_per_minute = key.tokens_per_minute
    if key.budget_usd is not None:
        out.budget_usd = key.budget_usd
    if key.expires_at is not None:
        out.expire_time = int(key.expires_at)
    if key.revoked_at is not None:
        out.revoke_time = int(key.revoked_at)
    return out


def validate_new_key(request: admin_pb.CreateKeyRequest) -> dict[str, object]:
    """Checks a CreateKeyRequest; returns the key store's arguments."""
    if not request.name:
        raise InvalidArgument.for_field("name", "is required")
    if request.kind not in KINDS:
        raise InvalidArgument.for_field("kind", f"must be one of {', '.join(KINDS)}")
    period = request.budget_period or "monthly"
    if period not in PERIODS:
        raise InvalidArgument.for_field("budget_period", f"must be one of {', '.join(PERIODS)}")
    args: dict[str, object] = {
        "kind": request.kind, "name": request.name, "owner": request.owner, "budget_period": period,
    }  # fmt: skip
    for name in ("requests_per_minute", "tokens_per_minute"):
        if request.HasField(name):
            if getattr(request, name) < 1:
                raise InvalidArgument.for_field(name, "must be at least 1")
            args[name] = getattr(request, name)
    if request.HasField("budget_usd"):
        if request.budget_usd < 0:
            raise InvalidArgument.for_field("budget_usd", "must be at least 0")
        args["budget_usd"] = request.budget_usd
    if request.HasField("expire_time"):
        if request.expire_time <= time.time():
            raise InvalidArgument.for_field("expire_time", "must be in the future")
        args["expires_at"] = float(request.expire_time)
    return args


def _bucket(b: Bucket, day: str, model: str) -> usage_pb.UsageBucket:
    return usage_pb.UsageBucket(
        day=day, model=model, requests=b.requests, errors=b.errors,
        prompt_tokens=b.prompt_tokens, completion_tokens=b.completion_tokens,
        total_tokens=b.total_tokens, cost_usd=round(b.cost_usd, 11),
    )  # fmt: skip


def _sum(buckets: list[Bucket]) -> Bucket:
    return Bucket(
        "", "", sum(b.requests for b in buckets), sum(b.prompt_tokens for b in buckets),
        sum(b.completion_tokens for b in buckets), sum(b.total_tokens for b in buckets),
        sum(b.cost_usd for b in buckets), sum(b.errors for b in buckets),
    )  # fmt: skip


class AdminHandlers:
    def __init__(self, admission: Admission, accounts: Accounts, store: Store | None) -> None:
        self.admission = admission
        self.accounts = accounts
        self.store = store

    def _store(self) -> Store:
        if self.store is None:
            raise Internal("this gateway has no key store", {})
        return self.store

    async def _key(self, id_or_name: str) -> KeyRecord:
        if not id_or_name:
            raise InvalidArgument.for_field("key_id", "is required")
        key = await self._store().keys.get(id_or_name)
        if key is None:
            raise NotFound(f"key {id_or_name!r} does not exist", {"key": id_or_name})
        return key

    async def create_key(
        self, request: admin_pb.CreateKeyRequest, call: Call
    ) -> admin_pb.CreateKeyResponse:
        await self.admission.admit(call.metadata, "admin", call.response_metadata)
        args = validate_new_key(request)
        key, secret = await self._store().keys.create(**args)  # type: ignore[arg-type]
        return admin_pb.CreateKeyResponse(key=key_message(key), secret=secret)

    async def list_keys(
        self, request: admin_pb.ListKeysRequest, call: Call
    ) -> admin_pb.ListKeysResponse:
        await self.admission.admit(call.metadata, "admin", call.response_metadata)
        keys = await self._store().keys.list(
            kind=request.kind or None, owner=request.owner or None,
            include_revoked=request.include_revoked,
        )  # fmt: skip
        return admin_pb.ListKeysResponse(keys=[key_message(k) for k in keys])

    async def get_key(self, request: admin_pb.GetKeyRequest, call: Call) -> admin_pb.GetKeyResponse:
        await self.admission.admit(call.metadata, "admin", call.response_metadata)
        return admin_pb.GetKeyResponse(key=key_message(await self._key(request.key_id)))

    async def revoke_key(
        self, request: admin_pb.RevokeKeyRequest, call: Call
    ) -> admin_pb.RevokeKeyResponse:
        await self.admission.admit(call.metadata, "admin", call.response_metadata)
        key = await self._key(request.key_id)
        revoked = await self._store().keys.revoke(key.id)
        assert revoked is not None
        self.admission.keys.forget(key.id)
        return admin_pb.RevokeKeyResponse(key=key_message(revoked))

    async def _usage_principal(self, request: usage_pb.GetUsageRequest, call: Call) -> Principal:
        # A Bearer key alone says its kind only through the key itself.
        bearer = await self.admission.keys.bearer_kind(call.metadata)
        if HEADER["admin"] in call.metadata or bearer == "admin":
            await self.admission.admit(call.metadata, "admin", call.response_metadata)
            if not request.key_id:
                raise InvalidArgument.for_field("key_id", "is required with an admin key")
            configured = self.admission.keys.ring.by_id_or_name(request.key_id)
            if configured is not None:
                return configured
            return Principal.of_record(await self._key(request.key_id))
        if request.key_id:
            raise InvalidArgument.for_field("key_id", "needs an admin key (x-admin-key)")
        kind: KeyKind = "router" if HEADER["router"] in call.metadata else bearer or "api"
        return await self.admission.admit(call.metadata, kind, call.response_metadata)

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
            await asyncio.wait_for(self.accounts.ledger.flush(), 2.0)
        rows = await self._store().usage.buckets(principal.key_id, start, end)
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
        if principal.budget_usd is not None:
            spec = BudgetSpec(
                principal.key_id, principal.name, principal.budget_usd, principal.budget_period
            )
            spent, reserved = await self.accounts.budgets.status(spec)
            response.budget.CopyFrom(
                usage_pb.BudgetStatus(
                    budget_usd=principal.budget_usd,
                    period=principal.budget_period,
                    period_start_time=int(period_bounds(principal.budget_period)[0]),
                    spent_usd=round(spent, 11),
                    reserved_usd=round(reserved, 11),
                    remaining_usd=round(max(0.0, principal.budget_usd - spent), 11),
                )  # fmt: skip
            )
        return response

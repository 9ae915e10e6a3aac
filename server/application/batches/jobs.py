"""The Batches API over one job model: a batch is created whole (validated, its lines
stored) in `validating`, run by the worker (`in_progress`, `finalizing`, then
`completed`, or `cancelling` then `cancelled`, or `expired` past its window), and read
back as OpenAI writes a batch, its usage the sum of its ledger rows.
"""

from __future__ import annotations

import os
import time
from typing import Any

import orjson

from server.accounting.accounts import Accounts
from server.accounting.admission import check_model
from server.accounting.budget import exhausted
from server.application.batches import gemini, handover, lines
from server.application.batches.files import Files, TooLarge
from server.application.pipeline.state import Live
from server.base.caller import Principal, account_fields
from server.base.config import ModelConfig, Price
from server.base.errors import InvalidArgument, NotFound, RateLimited
from server.storage.batches import ACTIVE, BatchStore, NewLine
from server.storage.db import Row

# The completion windows a batch may ask for (`batches.completion_window_s` long).
WINDOWS = ("24h",)
STAMPS = (
    "in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at",
    "cancelling_at", "cancelled_at",
)  # fmt: skip
MAX_METADATA = 16


def new_id(dialect: str) -> str:
    prefix = "msgbatch_" if dialect == "anthropic" else "batch_"
    return f"{prefix}{os.urandom(12).hex()}"


class Batches:
    def __init__(self, live: Live, accounts: Accounts, store: BatchStore, files: Files) -> None:
        self.live = live
        self.accounts = accounts
        self.store = store
        self.files = files

    async def create(
        self,
        principal: Principal,
        input_file_id: str | bytes,
        endpoint: str,
        completion_window: str,
        metadata: dict[str, str] | None,
    ) -> Row:
        """Checks the whole input (an uploaded file's, or given as bytes), reserves nothing yet unless it fits every budget, and
        stores the batch with every line, or refuses it whole."""
        if endpoint not in lines.ENDPOINTS:
            raise InvalidArgument.for_field(
                "endpoint", f"must be one of {', '.join(lines.ENDPOINTS)}"
            )
        if completion_window not in WINDOWS:
            raise InvalidArgument.for_field("completion_window", "must be 24h")
        _check_metadata(metadata)
        config = self.live.current.config.batches
        if isinstance(input_file_id, bytes):  # the input itself (gRPC's input_jsonl)
            if len(input_file_id) > config.max_file_bytes:
                raise TooLarge(
                    f"input_jsonl: the input exceeds {config.max_file_bytes} bytes",
                    {"field": "input_jsonl"},
                )
            data, input_file_id = input_file_id, ""
        else:
            data = await self.files.read(principal.key_id, input_file_id)
        read = lines.read(data, endpoint, config.max_lines, config.max_line_bytes)
        return await self._create(
            principal, "openai", endpoint, read, input_file_id, completion_window, metadata
        )

    async def create_inline(self, principal: Principal, requests: Any) -> Row:
        """An Anthropic message batch: its requests in the body, to /v1/messages."""
        config = self.live.current.config.batches
        read = lines.from_requests(requests, config.max_lines, config.max_line_bytes)
        return await self._create(principal, "anthropic", "/v1/messages", read, "", "24h", None)

    async def create_gemini(self, principal: Principal, model: str, body: Any) -> Row:
        """A Gemini batch: inline requests to one model, or an uploaded file of them
        (whose batch writes its responses to a file too)."""
        config = self.live.current.config.batches
        file_id = gemini.input_file(body)
        if file_id is None:
            read = gemini.read_requests(model, body, config.max_lines, config.max_line_bytes)
        else:
            data = await self.files.read(principal.key_id, file_id)
            read = gemini.read_file(model, data, config.max_lines, config.max_line_bytes)
        batch = body["batch"]
        name = batch.get("displayName") if isinstance(batch.get("displayName"), str) else ""
        return await self._create(
            principal, "gemini", gemini.ENDPOINT, read, file_id or "", "24h",
            {"display_name": name[:128]} if name else None,
        )  # fmt: skip

    async def _create(
        self,
        principal: Principal,
        dialect: str,
        endpoint: str,
        read: lines.Input,
        input_file_id: str,
        completion_window: str,
        metadata: dict[str, str] | None,
    ) -> Row:
        config = self.live.current.config.batches
        model = self._model(read.model)
        check_model(principal, model.id)
        await self._fits_queue(principal, read.tokens, config.max_enqueued_tokens_per_key)
        cost = _worst_cost(read.tokens, model.price, config.price_factor)
        await self._fits_budgets(principal, cost)
        now = time.time()
        batch = {
            "id": new_id(dialect), "key_id": principal.key_id, "dialect": dialect,
            "endpoint": endpoint, "model": model.id, "input_file_id": input_file_id,
            "completion_window": completion_window,
            "metadata": orjson.dumps(metadata or {}).decode(), "status": "validating",
            "created_at": now, "expires_at": now + config.completion_window_s,
            "total": len(read.lines), "team_id": principal.team_id,
            "org_id": principal.org_id, "user_id": principal.user_id,
            "tokens": read.tokens, "reserved_usd": cost,
            "upstream_provider": _handed_to(model, endpoint),
        }  # fmt: skip
        await self.store.create(
            batch,
            [NewLine(i, one.custom_id, orjson.dumps(one.body).decode())
             for i, one in enumerate(read.lines)],
        )  # fmt: skip
        found = await self.store.get(batch["id"])
        assert found is not None
        return found

    def _model(self, name: str) -> Any:
        config = self.live.current.config
        model = config.model(name)
        if model is None:
            raise InvalidArgument.for_field(
                "body.model", f"model {name!r} does not exist (line 1 names it)"
            )
        return model

    async def _fits_queue(self, principal: Principal, tokens: int, limit: int | None) -> None:
        """Refuses a batch that would put the key's queued tokens (its running batches'
        worst case) past `batches.max_enqueued_tokens_per_key`: 429."""
        if limit is None:
            return
        queued, _ = await self.store.outstanding({"key_id": principal.key_id})
        if queued + tokens > limit:
            raise RateLimited(
                f"the batches of key {principal.name!r} would hold {queued + tokens} tokens "
                f"in the queue, past its limit of {limit}",
                {"key": principal.name, "limit": str(limit)},
            )

    async def _fits_budgets(self, principal: Principal, cost: float) -> None:
        """Refuses a batch whose worst case does not fit a level's budget beside what
        the level spent, its calls in flight reserve and its running batches may still
        take: 429 naming the level."""
        for spec in principal.budgets:
            spent, reserved = await self.accounts.budgets.status(spec)
            _, held = await self.store.outstanding(account_fields(spec.key_id))
            if spent >= spec.limit_usd or spent + reserved + held + cost > spec.limit_usd:
                raise exhausted(spec, spent, reserved + held, cost)

    async def get(self, principal: Principal, batch_id: str, dialect: str = "openai") -> Row:
        found = await self.store.get(batch_id, principal.key_id)
        if found is None or found["dialect"] != dialect:
            raise NotFound(f"no batch {batch_id!r}", {"batch_id": batch_id})
        return found

    async def page(
        self, principal: Principal, limit: int, after: str | None, dialect: str = "openai"
    ) -> list[Row]:
        return await self.store.page(principal.key_id, dialect, limit, after)

    async def cancel(self, principal: Principal, batch_id: str, dialect: str = "openai") -> Row:
        await self.get(principal, batch_id, dialect)
        await self.store.cancel(batch_id, time.time())
        return await self.get(principal, batch_id, dialect)

    async def delete(self, principal: Principal, batch_id: str, dialect: str) -> None:
        """Deletes a batch that has ended (one still running is cancelled first)."""
        found = await self.get(principal, batch_id, dialect)
        if found["status"] in ACTIVE:
            raise InvalidArgument.for_field(
                "message_batch_id", "a batch still processing cannot be deleted; cancel it first"
            )
        await self.store.delete(batch_id)

    async def lines_of(self, principal: Principal, batch_id: str, dialect: str) -> list[Row]:
        """Every line of an ended batch, in order."""
        found = await self.get(principal, batch_id, dialect)
        if found["status"] in ACTIVE:
            raise InvalidArgument.for_field(
                "message_batch_id", "the batch has not ended: its results are not ready"
            )
        rows: list[Row] = []
        while more := await self.store.lines(batch_id, rows[-1]["line"] if rows else -1, 1000):
            rows.extend(more)
        return rows

    async def as_object(self, row: Row) -> dict[str, Any]:
        """A batch as OpenAI writes it, its counts and usage read now."""
        counts = await self.store.counts(row["id"])
        usage = await self.store.usage(row["id"])
        found: dict[str, Any] = {
            "id": row["id"], "object": "batch", "endpoint": row["endpoint"],
            "model": row["model"], "errors": None, "input_file_id": row["input_file_id"],
            "completion_window": row["completion_window"], "status": row["status"],
            "output_file_id": row["output_file_id"] or None,
            "error_file_id": row["error_file_id"] or None,
            "created_at": int(row["created_at"]), "expires_at": int(row["expires_at"]),
            "request_counts": {
                "total": counts.total, "completed": counts.completed, "failed": counts.failed,
            },
            "usage": {
                "input_tokens": usage.input_tokens,
                "input_tokens_details": {"cached_tokens": usage.cached_tokens},
                "output_tokens": usage.output_tokens,
                "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
                "total_tokens": usage.total_tokens,
            },
            "metadata": orjson.loads(row["metadata"]) or None,
        }  # fmt: skip
        for stamp in STAMPS:
            found[stamp] = int(row[stamp]) if row[stamp] is not None else None
        return found


def _handed_to(model: ModelConfig, endpoint: str) -> str:
    """The provider a batch is handed to (its model's `batch: provider`, the first of its
    providers whose batch API takes the batch's endpoint); empty when the gateway runs
    it, as it runs the rest (Gemini's batches, an endpoint no such provider takes)."""
    if model.batch != "provider":
        return ""
    provider = handover.provider_for(model, endpoint)
    return provider.id if provider is not None else ""


def _worst_cost(tokens: int, price: Price | None, factor: float) -> float:
    """Every token at the dearer of the model's batch input and output prices."""
    if price is None:
        return 0.0
    batch = price.for_batch(factor)
    return tokens * max(batch.input, batch.output) / 1_000_000


def _check_metadata(metadata: Any) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict) or len(metadata) > MAX_METADATA:
        raise InvalidArgument.for_field(
            "metadata", f"must be an object of at most {MAX_METADATA} strings"
        )
    for key, value in metadata.items():
        if not isinstance(value, str) or len(key) > 64 or len(value) > 512:
            raise InvalidArgument.for_field(
                f"metadata.{key}", "must be a string of at most 512 characters"
            )

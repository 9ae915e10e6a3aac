"""Runs batches: any instance takes a batch whose lease has lapsed, renews the lease
while it runs the batch's lines, and finalizes it.

    validating -> in_progress -> finalizing -> completed
                       |-> cancelling -> cancelled       (asked by the caller)
                       |-> expired                       (past its completion window)

Each line goes through the same pipeline as a live call (`LineRunner`), as its batch's
key, at the batch price, and yields to live calls. Its ledger row names the batch and
its custom_id, and the database takes one such row per line: the line ends (its answer
stored) only once its row is in the database, so a worker that dies between the two
runs the line again and the second row is refused. A line cut off mid-call by a crash
is run again; only the run that ends is billed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from server.accounting.accounts import Accounts, passing
from server.application.batches import gemini
from server.application.batches.files import Files
from server.application.pipeline.state import Live
from server.base import costs
from server.base.call import new_request_id
from server.base.caller import Principal
from server.base.config import ProviderConfig
from server.base.errors import GatewayError, Internal, Unauthenticated
from server.base.provider_batches import Polled, ProviderBatches
from server.base.spans import span
from server.storage.batches import BatchStore, Ended, NewLine

log = logging.getLogger(__name__)
# How long a line waits before another attempt after a passing failure, at most.
BACKOFF_MAX_S = 5.0
# How often expired files are deleted.
CLEAN_EVERY_S = 600.0
# How often a line waiting for live calls to thin out looks again.
YIELD_POLL_S = 0.02


class LineRunner(Protocol):
    def method_of(self, endpoint: str) -> str:
        """The RPC method a live call of `endpoint` is."""
        ...

    async def run(
        self, principal: Principal, endpoint: str, body: dict[str, Any], batch_id: str,
        custom_id: str, price_factor: float,
    ) -> tuple[int, dict[str, Any], str]:  # fmt: skip
        """Runs one line as a live call of `endpoint`: its HTTP status, answer (or error
        body) and request id. Raises a passing GatewayError to be tried again."""
        ...


class Worker:
    def __init__(
        self,
        live: Live,
        accounts: Accounts,
        store: BatchStore,
        files: Files,
        runner: LineRunner,
        in_flight: Callable[[], int],
        open_api: Callable[[ProviderConfig, str], ProviderBatches] | None = None,
    ) -> None:
        self.live = live
        self.accounts = accounts
        self.store = store
        self.files = files
        self.runner = runner
        self.in_flight = in_flight
        # A client of a provider's own batch API (server/providers/batch_apis.py), for
        # the batches handed to one.
        self.open_api = open_api
        self.owner = f"{os.uname().nodename}:{os.getpid()}:{os.urandom(4).hex()}"
        # What the metrics read: lines running now, lines ended by outcome (succeeded,
        # errored, cancelled, expired), attempts repeated after a passing failure.
        self.running = 0
        self.ended: Counter[str] = Counter()
        self.retried = 0
        self._batches: dict[str, asyncio.Task[None]] = {}
        self._per_key: dict[str, asyncio.Semaphore] = {}
        self._all = asyncio.Semaphore(live.current.config.batches.concurrency)
        self._to_end: list[Ended] = []
        self._committing = asyncio.Lock()

    async def run_forever(self) -> None:
        cleaned = 0.0
        while True:
            config = self.live.current.config.batches
            try:
                if config.run:
                    await self.take(config.lease_s)
                if time.monotonic() - cleaned > CLEAN_EVERY_S:
                    cleaned = time.monotonic()
                    await self.files.clean()
            except Exception as exc:  # the database away: look again later
                log.warning("batch worker: %r", exc)
            await asyncio.sleep(config.poll_s)

    async def take(self, lease_s: float) -> None:
        free = max(0, 8 - len(self._batches))
        for batch_id in await self.store.claim(self.owner, lease_s, free):
            task = asyncio.create_task(self._held(batch_id, lease_s))
            self._batches[batch_id] = task
            task.add_done_callback(functools.partial(self._forget, batch_id))

    @property
    def held(self) -> int:
        """Batches this instance runs now."""
        return len(self._batches)

    def _forget(self, batch_id: str, _: asyncio.Task[None]) -> None:
        self._batches.pop(batch_id, None)

    async def aclose(self) -> None:
        for task in list(self._batches.values()):
            task.cancel()
        for task in list(self._batches.values()):
            with contextlib.suppress(BaseException):
                await task

    async def _held(self, batch_id: str, lease_s: float) -> None:
        """Runs the batch while renewing its lease; stops when the lease is lost."""
        work = asyncio.create_task(self._run(batch_id))
        try:
            while not work.done():
                await asyncio.wait({work}, timeout=lease_s / 3)
                if not work.done() and not await self.store.renew(batch_id, self.owner, lease_s):
                    log.warning("batch %s: lease lost; another instance runs it", batch_id)
                    work.cancel()
            await work
        except asyncio.CancelledError:
            work.cancel()
            with contextlib.suppress(BaseException):
                await work
            raise
        except Exception as exc:
            log.warning("batch %s: stopped: %r", batch_id, exc)
        finally:
            with contextlib.suppress(Exception):
                await self.store.release(batch_id, self.owner)

    async def _run(self, batch_id: str) -> None:
        batch = await self.store.get(batch_id)
        if batch is None:
            return
        if batch["status"] == "validating":
            # Not over a cancel asked meanwhile: the loop below then sees it.
            await self.store.advance(batch_id, "validating", "in_progress", time.time())
        if batch["upstream_provider"]:
            return await self._handed(batch_id)
        config = self.live.current.config.batches
        per_batch = asyncio.Semaphore(config.concurrency_per_batch)
        per_key = self._per_key.setdefault(
            batch["key_id"], asyncio.Semaphore(config.concurrency_per_key)
        )
        while True:
            batch = await self.store.get(batch_id)
            if batch is None:
                return
            if batch["status"] == "cancelling":
                await self.store.end_pending(batch_id, "cancelled")
                return await self._finalize(batch, "cancelled")
            if batch["status"] == "finalizing":
                return await self._finalize(batch, "completed")
            if time.time() > batch["expires_at"]:
                await self.store.end_pending(batch_id, "expired")
                return await self._finalize(batch, "expired")
            pending = await self.store.pending_lines(batch_id, config.concurrency_per_batch * 16)
            if not pending:
                if await self.store.advance(batch_id, "in_progress", "finalizing", time.time()):
                    return await self._finalize(batch, "completed")
                continue  # cancelled meanwhile: every line ran, and it ends cancelled
            try:
                principal = await self.accounts.admission.keys.by_id(
                    batch["key_id"], "api", self.live.current.keys
                )
            except Unauthenticated:
                # The key was revoked: the lines not run yet are not run.
                await self.store.end_pending(batch_id, "errored")
                await self.store.set_status(batch_id, "failed", "failed", time.time())
                return
            async with asyncio.TaskGroup() as group:
                for line in pending:
                    group.create_task(self._line(batch, principal, line, per_batch, per_key))

    async def _line(
        self, batch: dict[str, Any], principal: Principal, line: NewLine,
        per_batch: asyncio.Semaphore, per_key: asyncio.Semaphore,
    ) -> None:  # fmt: skip
        config = self.live.current.config.batches
        async with per_batch, per_key, self._all:
            await self._yield(config.yield_above_in_flight)
            if time.time() > batch["expires_at"]:
                return  # past the window: the line is not run, and ends expired
            self.running += 1
            try:
                with span("gateway.batch.line", **{"gateway.batch.id": batch["id"],
                                                   "gateway.batch.custom_id": line.custom_id}):  # fmt: skip
                    outcome = await self._attempts(batch, principal, line, config)
            finally:
                self.running -= 1
        if outcome is None:
            return  # passing failures throughout: the line waits for the next round
        status_code, body, request_id = outcome
        result = orjson.dumps({"status_code": status_code, "request_id": request_id,
                               "body": body}).decode()  # fmt: skip
        status = "succeeded" if status_code == 200 else "errored"
        await asyncio.sleep(0)  # the call's record closes: its row is in the ledger's buffer
        self._to_end.append(Ended(batch["id"], line.line, status, status_code, result))
        await self._commit()

    async def _commit(self) -> None:
        """Ends the lines that finished, after their rows are in the database: one
        flush and one write for every line that finished meanwhile (a group commit)."""
        async with self._committing:
            taken, self._to_end = self._to_end, []
            if not taken:
                return  # a commit before ours took our line too
            await self.accounts.ledger.flush()
            await self.store.end_lines(taken)
            self.ended.update(one.status for one in taken)

    async def _attempts(
        self, batch: dict[str, Any], principal: Principal, line: NewLine, config: Any
    ) -> tuple[int, dict[str, Any], str] | None:
        body = orjson.loads(line.body)
        for attempt in range(config.line_attempts):
            try:
                return await self.runner.run(
                    principal, batch["endpoint"], body, batch["id"], line.custom_id,
                    config.price_factor,
                )  # fmt: skip
            except GatewayError as error:
                if not passing(error) or attempt + 1 == config.line_attempts:
                    return _error_answer(error)
                self.retried += 1
                wait = error.retry_after_s or min(BACKOFF_MAX_S, 0.05 * 2**attempt)
                await asyncio.sleep(min(wait, BACKOFF_MAX_S))
            except Exception:
                # A bug: the line fails alone (a 500, details in the log), not its batch.
                log.exception("batch %s: line %s failed", batch["id"], line.custom_id)
                return _error_answer(Internal("the gateway failed on this line"))
        return None

    async def _yield(self, above: int) -> None:
        """Waits while live calls fill the instance (batch lines not counted)."""
        while True:
            if self.in_flight() - self.running < above:
                return
            await asyncio.sleep(YIELD_POLL_S)

    async def _handed(self, batch_id: str) -> None:
        """Runs a batch through its provider's own batch API: hands the lines over once
        (the provider's id kept with the batch, so an instance that takes the batch over
        polls the same one), polls until the provider's batch ended with its results,
        bills and ends each line once, and finalizes the batch as the gateway's own."""
        batch = await self.store.get(batch_id)
        assert batch is not None
        config = self.live.current.config
        model = config.model(batch["model"])
        provider = next(
            (p for p in (model.providers if model else []) if p.id == batch["upstream_provider"]),
            None,
        )  # fmt: skip
        if model is None or provider is None or self.open_api is None:
            log.warning("batch %s: provider %s is no longer configured", batch_id,
                        batch["upstream_provider"])  # fmt: skip
            await self.store.end_pending(batch_id, "errored")
            await self.store.set_status(batch_id, "failed", "failed", time.time())
            return
        if batch["status"] == "cancelling" and not batch["upstream_id"]:
            await self.store.end_pending(batch_id, "cancelled")
            return await self._finalize(batch, "cancelled")
        api = self.open_api(provider, f"models[{model.id}].providers[{provider.id}]")
        try:
            upstream_id = batch["upstream_id"]
            if not upstream_id:
                lines: list[tuple[str, Any]] = []
                while more := await self.store.pending_lines(batch_id, 1000, len(lines)):
                    lines.extend((one.custom_id, orjson.loads(one.body)) for one in more)
                upstream_id = await api.submit(batch_id, batch["endpoint"], lines)
                await self.store.set_upstream(batch_id, upstream_id)
            cancel_sent = False
            while True:
                batch = await self.store.get(batch_id)
                assert batch is not None
                if batch["status"] == "cancelling" and not cancel_sent:
                    await api.cancel(upstream_id)
                    cancel_sent = True
                polled = await api.poll(upstream_id)
                if polled.state != "running":
                    return await self._handed_ended(batch, model, provider.id, polled)
                await asyncio.sleep(self.live.current.config.batches.provider_poll_s)
        finally:
            await api.aclose()

    async def _handed_ended(
        self, batch: dict[str, Any], model: Any, provider_id: str, polled: Polled
    ) -> None:
        """Bills each line the provider ran (one ledger row each, at the model's batch
        prices), ends it with its answer, and the lines it did not run as the batch
        ended (expired, cancelled; errored when it failed)."""
        principal = await self.accounts.admission.keys.by_id(
            batch["key_id"], "api", self.live.current.keys
        )
        factor = self.live.current.config.batches.price_factor
        price = costs.batch_price(model.price, factor)
        by_id = {}
        after = 0
        while more := await self.store.pending_lines(batch["id"], 1000, after):
            after += len(more)
            by_id.update({one.custom_id: one.line for one in more})
        # Lines billed before a crash that kept them from ending: their rows and their
        # budgets' charges are made, and are not made again.
        billed = await self.store.billed(batch["id"])
        ended: list[Ended] = []
        for result in polled.results:
            line = by_id.pop(result.custom_id, None)
            if line is None:
                continue  # ended before, or not ours
            request_id = new_request_id()
            cost = costs.cost(result.counts, price) if result.counts is not None else None
            if result.custom_id not in billed:
                await self.accounts.bill_handed_line(
                    principal, batch["id"], result.custom_id, model, provider_id,
                    self.runner.method_of(batch["endpoint"]), result.counts, cost,
                    result.status_code, request_id,
                )  # fmt: skip
            answer = orjson.dumps({"status_code": result.status_code, "request_id": request_id,
                                   "body": result.body}).decode()  # fmt: skip
            status = "succeeded" if result.status_code == 200 else "errored"
            ended.append(Ended(batch["id"], line, status, result.status_code, answer))
        await self.accounts.ledger.flush()
        await self.store.end_lines(ended)
        self.ended.update(one.status for one in ended)
        rest = {"expired": "expired", "failed": "errored"}.get(polled.state, "cancelled")
        await self.store.end_pending(batch["id"], rest)
        if polled.state == "failed":
            await self.store.set_status(batch["id"], "failed", "failed", time.time())
            return
        if polled.state == "completed":
            await self.store.set_status(batch["id"], "finalizing", "finalizing", time.time())
        await self._finalize(batch, polled.state)

    async def _finalize(self, batch: dict[str, Any], status: str) -> None:
        """Writes the output and error files and ends the batch in `status` (an
        Anthropic batch's results, and an inline Gemini batch's, are read from its lines;
        a Gemini batch read from a file writes one responses file)."""
        if batch["dialect"] == "gemini" and batch["input_file_id"]:
            return await self._finalize_gemini_file(batch, status)
        if batch["dialect"] != "openai":
            return await self.store.finish(batch["id"], status, status, time.time(), "", "")
        output, errors = bytearray(), bytearray()
        after = -1
        while rows := await self.store.lines(batch["id"], after, 1000):
            for row in rows:
                after = row["line"]
                entry = _output_line(batch["id"], row)
                (output if row["status"] == "succeeded" else errors).extend(entry)
        key_id = batch["key_id"]
        output_id = errors_id = ""
        if output:
            made = await self.files.store(
                key_id, "batch_output", f"{batch['id']}_output.jsonl", bytes(output)
            )
            output_id = made.id
        if errors:
            made = await self.files.store(
                key_id, "batch_output", f"{batch['id']}_error.jsonl", bytes(errors)
            )
            errors_id = made.id
        await self.store.finish(batch["id"], status, status, time.time(), output_id, errors_id)

    async def _finalize_gemini_file(self, batch: dict[str, Any], status: str) -> None:
        responses = bytearray()
        after = -1
        while rows := await self.store.lines(batch["id"], after, 1000):
            after = rows[-1]["line"]
            responses.extend(b"".join(gemini.output_line(row) for row in rows))
        made = await self.files.store(
            batch["key_id"], "batch_output", f"{batch['id']}_responses.jsonl", bytes(responses)
        )
        await self.store.finish(batch["id"], status, status, time.time(), made.id, "")


def _output_line(batch_id: str, row: dict[str, Any]) -> bytes:
    """One line of an output or error file, in OpenAI's format."""
    entry: dict[str, Any] = {"id": f"batch_req_{batch_id}_{row['line']}",
                             "custom_id": row["custom_id"]}  # fmt: skip
    if row["status"] in ("succeeded", "errored") and row["result"]:
        entry["response"] = orjson.loads(row["result"])
        entry["error"] = None
    else:
        code = "batch_cancelled" if row["status"] == "cancelled" else "batch_expired"
        entry["response"] = None
        entry["error"] = {
            "code": code,
            "message": f"the line was not run: the batch {row['status']}",
        }
    return orjson.dumps(entry) + b"\n"


def _error_answer(error: GatewayError) -> tuple[int, dict[str, Any], str]:
    body = {"error": {"message": error.message, "type": error.reason.lower(),
                      "code": error.reason.lower(), "param": error.param}}  # fmt: skip
    return error.http_status, body, ""

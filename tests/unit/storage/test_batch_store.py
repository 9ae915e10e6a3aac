"""The batch store over a real SQLite database: a cancel asked while the worker moves the
batch along is never overwritten, whichever of the two writes first."""

from __future__ import annotations

import time

from server.storage import Store
from server.storage.batches import NewLine


async def created(store: Store, status: str = "validating") -> str:
    now = time.time()
    batch = {
        "id": "batch_race", "key_id": "k1", "dialect": "openai",
        "endpoint": "/v1/chat/completions", "model": "sim-mini", "status": status,
        "created_at": now, "expires_at": now + 3600, "total": 1,
    }  # fmt: skip
    await store.batches.create(batch, [NewLine(0, "c0", "{}")])
    return batch["id"]


async def status(store: Store, batch_id: str) -> str:
    row = await store.batches.get(batch_id)
    assert row is not None
    return row["status"]


async def test_the_worker_never_moves_a_batch_cancelled_meanwhile(store: Store) -> None:
    # The worker read "validating", then the caller cancelled: the worker's move loses.
    batch_id = await created(store)
    await store.batches.cancel(batch_id, time.time())
    assert not await store.batches.advance(batch_id, "validating", "in_progress", time.time())
    assert await status(store, batch_id) == "cancelling"
    # Every line ran, then the caller cancelled: it is not finalized as completed.
    assert not await store.batches.advance(batch_id, "in_progress", "finalizing", time.time())
    assert await status(store, batch_id) == "cancelling"


async def test_a_cancel_after_the_worker_moved_on_still_takes(store: Store) -> None:
    batch_id = await created(store)
    assert await store.batches.advance(batch_id, "validating", "in_progress", time.time())
    row = await store.batches.get(batch_id)
    assert row is not None and row["status"] == "in_progress" and row["in_progress_at"]
    await store.batches.cancel(batch_id, time.time())
    assert await status(store, batch_id) == "cancelling"


async def test_a_batch_finalizing_is_not_cancelled(store: Store) -> None:
    batch_id = await created(store, "in_progress")
    assert await store.batches.advance(batch_id, "in_progress", "finalizing", time.time())
    await store.batches.cancel(batch_id, time.time())
    assert await status(store, batch_id) == "finalizing"

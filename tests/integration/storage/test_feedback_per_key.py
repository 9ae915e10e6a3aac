"""Feedback is a key's word on its own request: callers choose their x-request-id, so
two keys may send the same one, and each key's feedback (and the prompt it trains on)
stays its own. On SQLite and PostgreSQL, and across the migration from the table keyed
by request id alone."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.base import config
from server.storage import migrations, open_store
from server.storage.db import connect
from tests.support.gateways import ROUTER_KEY, default_config_dict, running_gateway

OTHER = "gw-other-router-key-0000000"


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path, pg_url: str) -> dict[str, Any]:
    if request.param == "sqlite":
        return {"sqlite_path": str(tmp_path / "gateway.db")}
    return {"database_url": pg_url}


async def test_two_keys_with_one_request_id_keep_their_own_feedback(
    storage: dict[str, Any],
) -> None:
    data = default_config_dict()
    data["storage"] = storage
    data["routing"]["record_prompts"] = True
    data["keys"].append({"name": "other", "kind": "router", "secret": OTHER})
    shared_id = f"shared-{uuid.uuid4().hex[:8]}"
    prompts = {ROUTER_KEY: "first tenant's prompt", OTHER: "second tenant's prompt"}
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c,
    ):
        for key, prompt in prompts.items():
            answer = await c.post(
                "/v1/infer",
                headers={"x-router-key": key, "x-request-id": shared_id},
                json={"prompt": prompt, "profile": "economy"},
            )
            assert answer.status_code == 200
        for key, label in ((ROUTER_KEY, "correct"), (OTHER, "incorrect")):
            rated = await c.post(
                "/v1/feedback", headers={"x-router-key": key},
                json={"request_id": shared_id, "label": label},
            )  # fmt: skip
            assert rated.status_code == 200, rated.text
        assert gw.gateway is not None and gw.gateway.store is not None
        await gw.gateway.accounts.ledger.flush()
        store = gw.gateway.store
        rows = await store.db.fetch(
            "SELECT key_id, score FROM feedback WHERE request_id = ? ORDER BY score", shared_id
        )
        assert [(r["key_id"], r["score"]) for r in rows] == [
            ("cfg-other", 0.0), ("cfg-dev-router", 1.0),
        ]  # fmt: skip
        model = (await store.db.fetchrow(
            "SELECT model FROM usage_records WHERE request_id = ? LIMIT 1", shared_id
        ))["model"]  # fmt: skip
        trained = dict(await store.feedback.rated_prompts(model))
        assert trained == {"first tenant's prompt": 1.0, "second tenant's prompt": 0.0}


async def test_the_migration_keeps_feedback_given_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "old.db")
    # A database as the previous release left it: feedback keyed by request id alone.
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:3])
    db = await connect(None, path)
    try:
        await migrations.migrate(db)
        await db.execute(
            "INSERT INTO feedback (request_id, key_id, score, label, comment, ts) "
            "VALUES ('r1', 'k1', 0.5, '', 'kept', 1)"
        )
    finally:
        await db.close()
    monkeypatch.undo()
    store = await open_store(config.StorageConfig(sqlite_path=path))
    try:
        await store.feedback.save("r1", "k2", 1.0, "correct", "")
        rows = await store.db.fetch("SELECT key_id, comment FROM feedback ORDER BY key_id")
        assert [(r["key_id"], r["comment"]) for r in rows] == [("k1", "kept"), ("k2", "")]
    finally:
        await store.aclose()

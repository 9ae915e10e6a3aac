"""Feedback is a key's word on its own request: callers choose their x-request-id, so
two keys may send the same one, and each key's feedback (and the prompt it trains on)
stays its own. On SQLite and PostgreSQL, and across the migration from the table keyed
by request id alone."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from gateway.v1 import feedback_service_pb2 as fb
from gateway.v1 import feedback_service_pb2_grpc, router_service_pb2_grpc
from gateway.v1 import router_service_pb2 as rt

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
    data["storage"] |= storage
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


async def test_a_key_reusing_another_key_s_request_id_never_replaces_its_feedback(
    storage: dict[str, Any],
) -> None:
    """Over gRPC: the second key takes the first's request id as its own x-request-id and
    rates it again and again; the first key's word stays as it gave it."""
    data = default_config_dict()
    data["storage"] |= storage
    data["keys"].append({"name": "other", "kind": "router", "secret": OTHER})
    taken = f"taken-{uuid.uuid4().hex[:8]}"
    async with running_gateway(data) as gw, grpc.aio.insecure_channel(
        f"127.0.0.1:{gw.grpc_port}"
    ) as channel:  # fmt: skip
        router = router_service_pb2_grpc.RouterServiceStub(channel)
        feedback = feedback_service_pb2_grpc.FeedbackServiceStub(channel)
        first = (("x-router-key", ROUTER_KEY), ("x-request-id", taken))
        second = (("x-router-key", OTHER), ("x-request-id", taken))
        await router.Infer(rt.InferRequest(prompt="mine", profile="economy"), metadata=first)
        await feedback.SubmitFeedback(
            fb.SubmitFeedbackRequest(request_id=taken, label="correct", comment="mine"),
            metadata=first[:1],
        )
        await router.Infer(rt.InferRequest(prompt="theirs", profile="economy"), metadata=second)
        for comment in ("replaced?", "replaced again?"):
            await feedback.SubmitFeedback(
                fb.SubmitFeedbackRequest(request_id=taken, label="incorrect", comment=comment),
                metadata=second[:1],
            )
        assert gw.gateway is not None and gw.gateway.store is not None
        rows = await gw.gateway.store.db.fetch(
            "SELECT key_id, score, comment FROM feedback WHERE request_id = ? ORDER BY key_id",
            taken,
        )
    assert [(r["key_id"], r["score"], r["comment"]) for r in rows] == [
        ("cfg-dev-router", 1.0, "mine"), ("cfg-other", 0.0, "replaced again?"),
    ]  # fmt: skip

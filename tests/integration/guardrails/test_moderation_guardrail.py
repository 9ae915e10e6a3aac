"""A moderation guardrail (`kind: moderation`): what a caller sends to a chat model or an
operation is asked of a moderation model of the gateway's own, through its providers
with failover, and blocked or logged by the categories that model flags. Real clients
(the openai SDK, raw HTTP), the simulated moderation model and a strict fake of OpenAI's
/moderations, and bad configurations refused at start-up naming the field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from server.base.config import ConfigError, parse
from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.upstreams.base import Fault, serving
from tests.support.upstreams.config import PRICE, model, provider, with_models
from tests.support.upstreams.moderation import ModerationWire

A = {"x-api-key": API_KEY}
HARM = {"id": "harm", "kind": "moderation", "model": "sim-moderation",
        "categories": ["violence"]}  # fmt: skip


def guarded(*guardrails: dict[str, Any], data: dict[str, Any] | None = None) -> dict[str, Any]:
    data = data if data is not None else default_config_dict()
    data["guardrails"] = list(guardrails)
    data["default_guardrails"] = [g["id"] for g in guardrails]
    return data


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with running_gateway(guarded(HARM)) as gw:
        yield f"http://127.0.0.1:{gw.http_port}"


def chat(text: str) -> dict[str, Any]:
    return {"model": "sim-mini", "messages": [{"role": "user", "content": text}]}


async def test_a_flagged_category_blocks_the_call_before_its_model_is_asked(url: str) -> None:
    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0) as sdk:
        with pytest.raises(openai.BadRequestError) as blocked:
            await sdk.chat.completions.create(**chat("Plan an attack on the castle."))
        # Another category than the guardrail's: the call goes on.
        fine = await sdk.chat.completions.create(**chat("You idiot, say hello."))
        with pytest.raises(openai.BadRequestError) as embedded:
            await sdk.embeddings.create(model="sim-embed", input=["shoot the messenger"])
        # The moderation endpoint itself is not moderated by its own guardrail.
        verdict = await sdk.moderations.create(model="sim-moderation", input="attack")
    error: Any = blocked.value.body
    assert error["code"] == "guardrail_blocked" and error["param"] == "harm"
    assert "VIOLENCE" in error["message"] and "castle" not in error["message"]
    assert fine.choices[0].message.content
    assert embedded.value.body["param"] == "harm"  # type: ignore[index]
    assert verdict.results[0].flagged


async def test_a_logging_guardrail_counts_and_lets_the_call_through() -> None:
    logging = {**HARM, "on_input": "log", "categories": []}
    async with (
        running_gateway(guarded(logging)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=10) as c,
    ):
        got = await c.post("/v1/chat/completions", json=chat("kill it, you idiot"), headers=A)
    assert got.status_code == 200, got.text
    header = got.headers["x-gateway-guardrails"]
    assert "input:log:VIOLENCE=1" in header and "input:log:HARASSMENT=1" in header


def judged_by_fake(primary: str, backup: str, **guardrail: Any) -> dict[str, Any]:
    judge = model("judge", provider("judge-p", "openai", primary),
                  provider("judge-b", "openai", backup, "backup"), price=PRICE)  # fmt: skip
    judge["capabilities"] = ["moderation"]
    pii = {"id": "pii", "detectors": ["email"]}
    return guarded(pii, {**HARM, "model": "judge", **guardrail}, data=with_models(judge))


async def test_the_model_is_asked_through_its_providers_after_the_other_guardrails() -> None:
    primary_wire, backup_wire = ModerationWire(), ModerationWire()
    async with (
        serving(primary_wire, faults=[Fault("status", 503)]) as primary,
        serving(backup_wire) as backup,
        running_gateway(judged_by_fake(primary.url, backup.url)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=10) as c,
    ):
        blocked = await c.post(
            "/v1/chat/completions", json=chat("attack alice@example.com now"), headers=A
        )
        passed = await c.post("/v1/chat/completions", json=chat("a calm day"), headers=A)
    assert blocked.status_code == 400 and blocked.json()["error"]["param"] == "harm"
    assert passed.status_code == 200, passed.text
    # The primary failed once, and the backup read the text as the pii guardrail left it.
    assert len(primary.seen) == 2 and len(backup.seen) == 1
    assert backup.seen[0].body == {"model": "gpt-fake", "input": ["attack [EMAIL_1] now"]}
    assert primary_wire.refused == [] and backup_wire.refused == []


@pytest.mark.parametrize(("fail", "status"), [("closed", 503), ("open", 200)])
async def test_a_moderation_model_that_fails_fails_as_the_guardrail_says(
    fail: str, status: int
) -> None:
    down = Fault("status", 500)
    async with (
        serving(ModerationWire(), default=down) as primary,
        serving(ModerationWire(), default=down) as backup,
        running_gateway(judged_by_fake(primary.url, backup.url, fail=fail)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=10) as c,
    ):
        got = await c.post("/v1/chat/completions", json=chat("attack"), headers=A)
    assert got.status_code == status, got.text
    if fail == "closed":
        assert "harm" in got.json()["error"]["message"]


BAD: list[tuple[dict[str, Any], str]] = [
    ({"model": "nobody"}, "guardrails[0].model: unknown model 'nobody'"),
    ({"model": "sim-mini"}, "guardrails[0].model: 'sim-mini' does not declare `moderation`"),
    ({"model": None}, "model: a `moderation` guardrail names its moderation model"),
    ({"on_input": "redact"}, "on_input: a `moderation` guardrail blocks or logs"),
    ({"on_output": "block"}, "on_input) only"),
    ({"categories": ["rudeness"]}, "categories[0]: 'rudeness' is not one of OpenAI's"),
    ({"detectors": ["email"]}, "detectors, custom: a `moderation` guardrail has none"),
]


@pytest.mark.parametrize(("change", "words"), BAD, ids=[w for _, w in BAD])
def test_bad_moderation_guardrails_are_refused_at_start(change: dict[str, Any], words: str) -> None:
    given = {k: v for k, v in {**HARM, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as refused:
        parse(guarded(given), "test")
    assert words in str(refused.value)


def test_other_kinds_take_no_moderation_model() -> None:
    with pytest.raises(ConfigError) as refused:
        parse(guarded({"id": "pii", "model": "sim-moderation"}), "test")
    assert "only a `moderation` guardrail has them" in str(refused.value)


async def test_many_texts_are_asked_in_requests_of_32() -> None:
    wire = ModerationWire()
    async with (
        serving(wire) as judge,
        running_gateway(judged_by_fake(judge.url, judge.url)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=10) as c,
    ):
        documents = [f"calm document {i}" for i in range(40)]
        documents[35] = "an attack plan"
        got = await c.post("/v1/rerank", headers=A, json={
            "model": "sim-rerank", "query": "plans", "documents": documents})  # fmt: skip
    assert got.status_code == 400 and got.json()["error"]["param"] == "harm"
    assert [len(s.body["input"]) for s in judge.seen] == [32, 9]
    assert wire.refused == []

"""The gateway's response cache, through real clients: a repeated request is answered
from the cache (marked in a header, in usage and in the ledger, costing what the config
says) in the caller's dialect, streamed or whole; Cache-Control chooses per request;
what changes the answer separates entries and what does not (user, metadata) does not;
one key's answers never serve another unless shared; Redis shares them between
instances; an answer too large, or an entry that cannot be read, is a miss."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import grpc
import httpx
import pytest
from gateway.v1 import chat_service_pb2 as chat
from redis.asyncio import Redis

from server.storage.redis_topology import client_for
from tests.support.gateways import API_KEY, running_gateway
from tests.support.grpc_stubs import Stubs
from tests.support.shared_state import REDIS_URL, redis_settings
from tests.support.upstreams.base import FakeUpstream, serving
from tests.support.upstreams.config import PRICE, model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

OTHER_KEY = "gw-test-other-key-0000000000"
HELLO = {"model": "m", "messages": [{"role": "user", "content": "Say hello."}], "temperature": 0}


def config(fake: FakeUpstream, **cache: Any) -> dict[str, Any]:
    data = with_models(model("m", provider("m-p", "openai", fake.url)))
    data["keys"].append({"name": "other", "kind": "api", "secret": OTHER_KEY})
    data["response_cache"] = {"keys": ["*"], **cache}
    return data


@asynccontextmanager
async def gateway(data: dict[str, Any]) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=10,
                          headers={"authorization": f"Bearer {API_KEY}"}) as http,
    ):  # fmt: skip
        yield http


@pytest.fixture
async def fake() -> AsyncIterator[FakeUpstream]:
    async with serving(OpenAIWire(), text=("Hello", " there", "!")) as upstream:
        yield upstream


async def test_a_repeated_request_is_answered_from_the_cache(fake):
    async with gateway(config(fake)) as http:
        first = await http.post("/v1/chat/completions", json=HELLO)
        again = await http.post("/v1/chat/completions", json=HELLO)
    assert len(fake.seen) == 1, "the second answer did not go upstream"
    assert (first.headers["x-gateway-cache"], again.headers["x-gateway-cache"]) == ("miss", "hit")
    assert again.json()["choices"] == first.json()["choices"]
    usage, paid = again.json()["usage"], first.json()["usage"]
    assert usage["response_cached"] is True and "response_cached" not in paid
    assert usage["prompt_tokens"] == paid["prompt_tokens"] > 0
    assert usage["total_cost_usd"] == 0 and paid["total_cost_usd"] > 0


async def test_a_hit_streams_in_the_callers_dialect(fake):
    async with gateway(config(fake)) as http:
        await http.post("/v1/chat/completions", json=HELLO)
        streamed = await http.post("/v1/chat/completions", json={
            **HELLO, "stream": True, "stream_options": {"include_usage": True}})  # fmt: skip
    assert len(fake.seen) == 1
    assert streamed.headers["x-gateway-cache"] == "hit"
    chunks = [json.loads(line[6:]) for line in streamed.text.split("\n\n")
              if line.startswith("data: {")]  # fmt: skip
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello there!"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["response_cached"] is True
    assert streamed.text.endswith("data: [DONE]\n\n")


async def test_a_hit_in_the_messages_dialect_has_its_events(fake):
    body = {"model": "m", "max_tokens": 30, "temperature": 0,
            "messages": [{"role": "user", "content": "Say hello."}]}  # fmt: skip
    headers = {"anthropic-version": "2023-06-01"}
    async with gateway(config(fake)) as http:
        await http.post("/v1/messages", json=body, headers=headers)
        streamed = await http.post("/v1/messages", json={**body, "stream": True}, headers=headers)
    assert len(fake.seen) == 1
    events = [line[7:] for line in streamed.text.splitlines() if line.startswith("event: ")]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "content_block_delta" in events
    assert '"response_cached":true' in streamed.text


@pytest.mark.parametrize(
    "first, header, body, upstream_calls, second",
    [
        (None, None, {"temperature": 1}, 2, None),  # sampling: a new answer each time
        (None, None, {"temperature": None}, 2, None),  # the provider's default samples too
        ("max-age=60", "max-age=60", {"temperature": 1}, 1, "hit"),  # unless opted in
        (None, "max-age=60", {"temperature": 1}, 2, "miss"),  # the first did not opt in
        (None, "no-cache", {}, 2, "miss"),  # a fresh answer, kept again
        (None, "no-store", {}, 2, None),  # out of the cache both ways
        ("no-store", None, {}, 2, "miss"),  # ... and the first was not kept
        (None, "max-age=0", {}, 2, "miss"),  # nothing stored is young enough
        (None, "No-Cache, max-age=60", {}, 2, "miss"),  # directives are case-insensitive
    ],
)
async def test_cache_control_chooses_per_request(fake, first, header, body, upstream_calls, second):
    asked = {k: v for k, v in {**HELLO, **body}.items() if v is not None}
    async with gateway(config(fake)) as http:
        await http.post("/v1/chat/completions", json=asked,
                        headers={"cache-control": first} if first else {})  # fmt: skip
        reply = await http.post("/v1/chat/completions", json=asked,
                                headers={"cache-control": header} if header else {})  # fmt: skip
    assert reply.status_code == 200
    assert len(fake.seen) == upstream_calls
    assert reply.headers.get("x-gateway-cache") == second


async def test_what_changes_the_answer_separates_entries_and_the_rest_does_not(fake):
    async with gateway(config(fake)) as http:
        await http.post("/v1/chat/completions", json=HELLO)
        same = await http.post("/v1/chat/completions", json={
            **HELLO, "user": "someone-else", "metadata": {"trace": "x"}, "store": False})  # fmt: skip
        assert same.headers["x-gateway-cache"] == "hit"
        for changed in ({"max_tokens": 5}, {"seed": 3}, {"top_p": 0.5}, {"stop": ["x"]},
                        {"messages": [{"role": "user", "content": "Say bye."}]}):  # fmt: skip
            reply = await http.post("/v1/chat/completions", json={**HELLO, **changed})
            assert reply.headers["x-gateway-cache"] == "miss", changed
    assert len(fake.seen) == 6


@pytest.mark.parametrize("shared, other_hits", [(False, False), (True, True)])
async def test_one_keys_answers_serve_another_only_when_shared(fake, shared, other_hits):
    async with gateway(config(fake, shared_across_keys=shared)) as http:
        await http.post("/v1/chat/completions", json=HELLO)
        other = await http.post("/v1/chat/completions", json=HELLO,
                                headers={"authorization": f"Bearer {OTHER_KEY}"})  # fmt: skip
    assert (other.headers["x-gateway-cache"] == "hit") is other_hits
    assert len(fake.seen) == (1 if other_hits else 2)


async def test_billing_full_charges_a_hit_what_its_answer_cost(fake):
    async with gateway(config(fake, billing="full")) as http:
        first = (await http.post("/v1/chat/completions", json=HELLO)).json()["usage"]
        again = (await http.post("/v1/chat/completions", json=HELLO)).json()["usage"]
    assert again["response_cached"] is True
    assert again["total_cost_usd"] == first["total_cost_usd"] > 0


async def test_keys_and_models_not_named_are_not_cached(fake):
    data = config(fake)
    data["response_cache"] = {"keys": ["other"], "models": ["sim-mini"]}
    async with gateway(data) as http:
        for _ in range(2):
            reply = await http.post("/v1/chat/completions", json=HELLO)
            assert "x-gateway-cache" not in reply.headers
    assert len(fake.seen) == 2


async def test_an_answer_too_large_is_not_kept(fake):
    fake.text = ("word " * 400,)
    async with gateway(config(fake, max_entry_bytes=1024)) as http:
        for _ in range(2):
            assert (await http.post("/v1/chat/completions", json=HELLO)).status_code == 200
    assert len(fake.seen) == 2


async def test_grpc_callers_choose_with_metadata_and_read_the_outcome(fake):
    async with (
        running_gateway(config(fake)) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        stubs = Stubs(channel)
        request = chat.CreateChatCompletionRequest(
            model="m", temperature=1,
            messages=[chat.ChatMessage(role="user", content="Say hello.")],
        )  # fmt: skip
        metadata = (("authorization", f"Bearer {API_KEY}"), ("cache-control", "max-age=30"))
        outcomes = []
        for _ in range(2):
            call = stubs.chat.CreateChatCompletion(request, metadata=metadata)
            reply = await call
            outcomes.append(dict(await call.initial_metadata())["x-gateway-cache"])
    assert outcomes == ["miss", "hit"]
    assert reply.usage.response_cached and len(fake.seen) == 1


async def test_the_ledger_marks_a_hit(fake, tmp_path):
    data = config(fake)
    data["storage"] |= {"sqlite_path": str(tmp_path / "gw.db")}
    async with running_gateway(data) as gw:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}",
                                     headers={"authorization": f"Bearer {API_KEY}"}) as http:  # fmt: skip
            for _ in range(2):
                await http.post("/v1/chat/completions", json=HELLO)
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT * FROM usage_records ORDER BY id")
    (first, again) = rows
    assert (bool(first["response_cached"]), bool(again["response_cached"])) == (False, True)
    assert again["provider"] == "response-cache" and first["provider"] == "m-p"
    assert again["total_cost_usd"] == 0 and first["total_cost_usd"] > 0
    assert again["prompt_tokens"] == first["prompt_tokens"]
    assert PRICE["input"] > 0  # the model is priced: a free hit is 0, not absent


@pytest.mark.redis
@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_instances_sharing_redis_share_answers_and_an_unreadable_entry_is_a_miss(
    fake, redis_prefix, request, kind
):
    settings = redis_settings(request, kind, redis_prefix)
    prefix = settings["redis_prefix"]
    data = config(fake)
    data["storage"] |= settings
    async with AsyncExitStack() as stack:
        one, two = [await stack.enter_async_context(gateway(data)) for _ in range(2)]
        await one.post("/v1/chat/completions", json=HELLO)
        assert (await two.post("/v1/chat/completions", json=HELLO)).headers[
            "x-gateway-cache"
        ] == "hit"
        redis = client_for(settings["redis_url"], 10, 4)  # one server or the cluster
        keys = [k async for k in redis.scan_iter(f"{prefix}response:*")]
        assert len(keys) == 1
        await redis.set(keys[0], b"\x00not an entry")
        await redis.aclose()
        reply = await two.post("/v1/chat/completions", json=HELLO)
    assert reply.status_code == 200 and reply.headers["x-gateway-cache"] == "miss"
    assert len(fake.seen) == 2


async def test_a_hit_in_the_responses_dialect_can_be_continued(fake):
    body = {"model": "m", "input": "Say hello.", "temperature": 0}
    async with gateway(config(fake)) as http:
        first = await http.post("/v1/responses", json=body)
        again = await http.post("/v1/responses", json=body)
        assert again.headers["x-gateway-cache"] == "hit", again.text
        assert again.json()["id"] != first.json()["id"]
        assert again.json()["usage"]["response_cached"] is True
        assert again.json()["output"][0]["content"][0]["text"] == "Hello there!"
        follow = await http.post("/v1/responses", json={
            "model": "m", "input": "And again.", "previous_response_id": again.json()["id"]})  # fmt: skip
    assert follow.status_code == 200, follow.text
    # The continuation reached the upstream with the replayed turn in its history.
    sent = fake.seen[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == "Hello there!"


@pytest.mark.redis
@pytest.mark.parametrize(
    "damage",
    [
        lambda e: e["events"][0][1].update(text=5),  # text as a number
        lambda e: e["events"][0][1].update(choice="0"),
        lambda e: e["events"][-1][1].update(counts={**e["events"][-1][1]["counts"],
                                                     "prompt_tokens": "9"}),
        lambda e: e["events"][-1][1].update(finish_reason=None),
        lambda e: e["events"].insert(0, ["ToolCallDelta", {"index": 0, "arguments": 1}]),
    ],
    ids=["text-number", "choice-string", "count-string", "reason-null", "arguments-number"],
)  # fmt: skip
async def test_an_entry_with_a_field_of_another_type_is_a_miss_with_its_ledger_row(
    fake, redis_prefix, tmp_path, damage
):
    prefix = f"{redis_prefix}{uuid.uuid4().hex[:6]}:"
    data = config(fake)
    data["storage"] |= {"redis_url": REDIS_URL, "redis_prefix": prefix,
                       "sqlite_path": str(tmp_path / "gw.db")}  # fmt: skip
    async with running_gateway(data) as gw, httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{gw.http_port}", timeout=10,
        headers={"authorization": f"Bearer {API_KEY}"},
    ) as http:  # fmt: skip
        await http.post("/v1/chat/completions", json=HELLO)
        redis = Redis.from_url(REDIS_URL)
        try:
            [key] = [k async for k in redis.scan_iter(f"{prefix}response:*")]
            entry = json.loads(await redis.get(key))
            damage(entry)
            await redis.set(key, json.dumps(entry))
        finally:
            await redis.aclose()
        reply = await http.post("/v1/chat/completions", json=HELLO)
        assert reply.status_code == 200, reply.text
        assert reply.headers["x-gateway-cache"] == "miss"
        assert reply.json()["choices"][0]["message"]["content"] == "Hello there!"
        assert gw.gateway is not None and gw.gateway.store is not None
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch(
            "SELECT status, provider, response_cached FROM usage_records ORDER BY id"
        )
    assert [(r["status"], r["provider"]) for r in rows] == [("OK", "m-p")] * 2
    assert len(fake.seen) == 2


async def test_the_memory_cache_is_bounded_in_bytes():
    async with serving(OpenAIWire(), text=("x" * 20_000,)) as big:
        data = config(big, max_entries=10_000, max_bytes=100_000)
        async with gateway(data) as http:
            for i in range(20):
                ask = {**HELLO, "messages": [{"role": "user", "content": f"Say {i}."}]}
                assert (await http.post("/v1/chat/completions", json=ask)).status_code == 200
            # 20 answers of 20 KB with room for 10,000: the bytes bound them. The newest
            # stay; the oldest went first.
            cached = []
            for i in (19, 16, 0):
                ask = {**HELLO, "messages": [{"role": "user", "content": f"Say {i}."}]}
                reply = await http.post("/v1/chat/completions", json=ask)
                cached.append(reply.headers["x-gateway-cache"])
    assert cached == ["hit", "hit", "miss"]

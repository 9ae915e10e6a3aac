"""A Realtime session on a model whose upstream serves OpenAI's Realtime API (OpenAI,
Azure OpenAI) is relayed there: the openai SDK's `realtime.connect()` against the
gateway, a strict fake Realtime upstream (a real WebSocket server: its path, its key
header, its events' shapes) behind it. The events come as the upstream wrote them but
for the session's model; the upstream's key is the provider's, never the caller's;
each `response.done` is one ledger row, its text, audio and cached tokens apart and
each priced at its own rate; a response the budget cannot cover is refused naming the
level and never reaches the upstream; guardrails read the text going up; a response
under way when the client leaves is still metered."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
import websockets

from tests.support.gateways import API_KEY, running_gateway, wait_for
from tests.support.upstreams import realtime
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.realtime import RealtimeUpstream

# OpenAI's gpt-realtime prices, with cached audio at a rate of its own.
PRICE = {"input": 4.0, "output": 16.0, "cached_input": 0.4, "audio_input": 32.0,
         "audio_output": 64.0, "cached_audio_input": 2.5}  # fmt: skip


@pytest.fixture
async def upstream() -> AsyncIterator[RealtimeUpstream]:
    async with RealtimeUpstream().running() as fake:
        yield fake


def _config(fake: RealtimeUpstream, **params: Any) -> dict[str, Any]:
    if fake.azure:
        entry = provider("rt-up", "azure_openai", fake.url, deployment=realtime.DEPLOYMENT,
                         api_version=realtime.API_VERSION, **params)  # fmt: skip
    else:
        entry = provider("rt-up", "openai", fake.url, realtime_api=True, **params)
    return with_models(model("rt", entry, price=PRICE))


def _sdk(gw: Any, key: str = API_KEY) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=key, max_retries=0
    )


async def _until_done(connection: Any) -> list[Any]:
    events = []
    async for event in connection:
        events.append(event)
        if event.type in ("response.done", "error"):
            return events
    raise AssertionError("the session ended before response.done")


async def _say(connection: Any, text: str, **response: Any) -> list[Any]:
    await connection.conversation.item.create(
        item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    )
    await connection.response.create(**({"response": response} if response else {}))
    return await _until_done(connection)


async def _rows(gw: Any) -> list[Any]:
    await gw.gateway.accounts.ledger.flush()
    return await gw.gateway.store.db.fetch(
        "SELECT * FROM usage_records WHERE method = 'RealtimeResponse' ORDER BY ts"
    )


def _cost(tokens: int, price: float) -> float:
    return tokens * price / 1_000_000


async def test_a_session_is_relayed_as_written_and_each_response_is_one_row_priced_apart(
    upstream: RealtimeUpstream,
) -> None:
    async with running_gateway(_config(upstream)) as gw, _sdk(gw) as sdk:
        async with sdk.realtime.connect(model="rt") as connection:
            created = await connection.recv()
            await connection.session.update(
                session={"type": "realtime", "model": "rt", "instructions": "Be brief."}
            )
            updated = await connection.recv()
            first = await _say(connection, "Say hello")
            second = await _say(connection, "Once more, spoken", output_modalities=["audio"])
        rows = await _rows(gw)
    assert upstream.problems == []
    # The session's model is the caller's name for it; upstream, the provider's.
    assert created.session.model == "rt" and updated.session.model == "rt"
    assert upstream.frames[0]["session"]["model"] == realtime.MODEL
    assert updated.session.instructions == "Be brief."
    # The upstream's events as it wrote them, its own fields kept.
    sent = {e["event_id"]: e for e in upstream.sent}
    for event in [*first, *second]:
        if event.type not in ("session.created", "session.updated"):
            assert event.to_dict() == sent[event.event_id]
    deltas = [e for e in first if e.type == "response.output_text.delta"]
    assert "".join(e.delta for e in deltas) == "".join(realtime.ANSWER)
    assert deltas[0].to_dict()["obfuscation"] == "x1"
    assert any(e.type == "response.output_audio.delta" for e in second)
    # Signed in with the provider's key, never the caller's.
    assert all(API_KEY not in json.dumps(h) for h in upstream.upgrades)
    assert all(API_KEY not in json.dumps(f) for f in upstream.frames)
    # One row per response.done, every kind of token at its own price.
    assert [r["status"] for r in rows] == ["OK", "OK"]
    row = rows[0]
    assert (row["prompt_tokens"], row["completion_tokens"]) == (120, 30)
    assert (row["cached_tokens"], row["cached_audio_tokens"]) == (64, 16)
    assert (row["audio_input_tokens"], row["audio_output_tokens"]) == (40, 20)
    assert row["provider"] == "rt-up" and row["model"] == "rt"
    fresh_text, fresh_audio = 120 - 64 - (40 - 16), 40 - 16
    assert row["audio_input_cost_usd"] == pytest.approx(_cost(fresh_audio, 32.0))
    assert row["input_cost_usd"] == pytest.approx(_cost(fresh_text, 4.0) + _cost(fresh_audio, 32.0))
    assert row["cache_input_cost_usd"] == pytest.approx(_cost(48, 0.4) + _cost(16, 2.5))
    assert row["audio_output_cost_usd"] == pytest.approx(_cost(20, 64.0))
    assert row["output_cost_usd"] == pytest.approx(_cost(10, 16.0) + _cost(20, 64.0))
    assert row["total_cost_usd"] == pytest.approx(
        row["input_cost_usd"] + row["cache_input_cost_usd"] + row["output_cost_usd"]
    )


async def test_azure_is_dialled_at_its_deployment_path_with_its_api_key_header() -> None:
    async with (
        RealtimeUpstream(azure=True).running() as fake,
        running_gateway(_config(fake)) as gw,
        _sdk(gw) as sdk,
        sdk.realtime.connect(model="rt") as connection,
    ):
        await connection.recv()
        events = await _say(connection, "Say hello")
        rows = await _rows(gw)
    assert fake.problems == []
    assert events[-1].type == "response.done" and events[-1].response.status == "completed"
    assert "authorization" not in fake.upgrades[0]
    assert [r["prompt_tokens"] for r in rows] == [120]


async def test_a_response_the_budget_cannot_cover_is_refused_and_never_sent_upstream(
    upstream: RealtimeUpstream,
) -> None:
    data = _config(upstream)
    secret = "gw-test-poor-key-0000000000"
    data["keys"].append({"name": "poor", "kind": "api", "secret": secret, "budget_usd": 1e-9})
    async with running_gateway(data) as gw, _sdk(gw, secret) as sdk:
        async with sdk.realtime.connect(model="rt") as connection:
            await connection.recv()
            events = await _say(connection, "hello")
        rows = await _rows(gw)
    kinds = [e.type for e in events]
    assert kinds[-1] == "error" and events[-1].error.code == "budget_exhausted"
    assert "key 'poor'" in events[-1].error.message
    assert "response.created" not in kinds
    assert [f["type"] for f in upstream.frames] == ["conversation.item.create"]
    assert [r["status"] for r in rows] == ["RESOURCE_EXHAUSTED"]


async def test_guardrails_refuse_the_text_going_up(upstream: RealtimeUpstream) -> None:
    data = _config(upstream)
    data["guardrails"] = [{"id": "pii", "detectors": ["email"], "on_input": "block"}]
    data["default_guardrails"] = ["pii"]
    async with (
        running_gateway(data) as gw,
        _sdk(gw) as sdk,
        sdk.realtime.connect(model="rt") as connection,
    ):
        await connection.recv()
        await connection.conversation.item.create(item={
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Write to jane.doe@example.com"}],
        })  # fmt: skip
        refused = await connection.recv()
        clean = await _say(connection, "Say hello")
    assert refused.type == "error" and "email" in refused.error.message.lower()
    assert "jane.doe" not in json.dumps(upstream.frames)
    assert clean[-1].type == "response.done"


async def test_output_the_guardrails_block_is_an_error_and_the_response_cancelled(
    upstream: RealtimeUpstream,
) -> None:
    upstream.answer = ("Write to ", "jane.doe@example.com", " today")
    data = _config(upstream)
    data["guardrails"] = [{"id": "pii", "detectors": ["email"], "on_output": "block"}]
    data["default_guardrails"] = ["pii"]
    async with running_gateway(data) as gw, _sdk(gw) as sdk:
        async with sdk.realtime.connect(model="rt") as connection:
            await connection.recv()
            events = await _say(connection, "Where do I write?")
            done = await _until_done(connection)  # the response itself still ends
        await wait_for(lambda: "response.cancel" in [f["type"] for f in upstream.frames])
    kinds = [e.type for e in events]
    assert kinds[-1] == "error" and "email" in events[-1].error.message.lower()
    assert "response.output_text.done" not in kinds
    assert done[-1].type == "response.done"


async def test_a_response_under_way_when_the_client_leaves_is_still_metered(
    upstream: RealtimeUpstream,
) -> None:
    upstream.hold = asyncio.Event()
    async with running_gateway(_config(upstream)) as gw:
        url = f"ws://127.0.0.1:{gw.http_port}/v1/realtime?model=rt"
        async with websockets.connect(url, additional_headers={
            "Authorization": f"Bearer {API_KEY}"}) as ws:  # fmt: skip
            await ws.recv()  # session.created
            await ws.send(json.dumps({"type": "response.create"}))
            while json.loads(await ws.recv())["type"] != "response.output_text.done":
                pass
        upstream.hold.set()  # the response ends upstream after the client left
        sessions = gw.http.server.config.app.state.sessions
        await wait_for(lambda: sessions.open == 0, timeout_s=30)
        rows = await _rows(gw)
    assert [(r["status"], r["prompt_tokens"]) for r in rows] == [("OK", 120)]


async def test_an_upstream_that_refuses_the_key_ends_the_session_with_an_error_event(
    upstream: RealtimeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_TEST_WRONG_KEY", "sk-wrong")
    data = _config(upstream, api_key_env="GATEWAY_TEST_WRONG_KEY")
    url_of = "ws://127.0.0.1:{}/v1/realtime?model=rt"
    async with (
        running_gateway(data) as gw,
        websockets.connect(
            url_of.format(gw.http_port), additional_headers={"Authorization": f"Bearer {API_KEY}"}
        ) as ws,
    ):
        error = json.loads(await ws.recv())
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    assert error["type"] == "error" and error["status"] == 503
    assert "rt-up" in error["error"]["message"] and "401" in error["error"]["message"]
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
    assert upstream.problems == ["bad credential"]


async def test_a_response_the_upstream_begins_of_its_own_is_metered_too(
    upstream: RealtimeUpstream,
) -> None:
    async with running_gateway(_config(upstream)) as gw, _sdk(gw) as sdk:
        async with sdk.realtime.connect(model="rt") as connection:
            await connection.recv()
            await connection.session.update(session={
                "type": "realtime",
                "audio": {"input": {"turn_detection": {"type": "server_vad"}}},
            })  # fmt: skip
            await connection.recv()
            await connection.input_audio_buffer.append(audio=base64.b64encode(bytes(4800)).decode())
            events = await _until_done(connection)
        rows = await _rows(gw)
    assert upstream.problems == []
    assert "response.create" not in [f["type"] for f in upstream.frames]
    assert events[-1].type == "response.done"
    assert [(r["status"], r["prompt_tokens"]) for r in rows] == [("OK", 120)]

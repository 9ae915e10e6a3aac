"""OpenAI's Realtime API (`GET /v1/realtime?model=`) through the openai SDK's
`realtime.connect()` on loopback: text turns remembered across a session, a function
call and its output, one ledger row per response.done with the usage it reported, a
budget refused per response naming its level; and every refusal of the upgrade, by raw
WebSocket frames, as an HTTP answer before the socket opens."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.shared_state import ADMIN_KEY, config_with

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


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


async def _say(connection: Any, text: str) -> list[Any]:
    await connection.conversation.item.create(
        item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    )
    await connection.response.create()
    return await _until_done(connection)


async def _rows(gw: Any) -> list[Any]:
    await gw.gateway.accounts.ledger.flush()
    return await gw.gateway.store.db.fetch(
        "SELECT method, status, prompt_tokens, completion_tokens, total_cost_usd "
        "FROM usage_records WHERE method = 'StreamResponse' ORDER BY ts"
    )


async def test_text_turns_are_remembered_and_each_response_is_one_ledger_row() -> None:
    async with running_gateway() as gw, _sdk(gw) as sdk:
        async with sdk.realtime.connect(model="sim-pro") as connection:
            created = await connection.recv()
            await connection.session.update(
                session={
                    "type": "realtime",
                    "output_modalities": ["text"],
                    "instructions": "Answer briefly.",
                }  # fmt: skip
            )
            updated = await connection.recv()
            first = await _say(connection, "Say hello")
            second = await _say(connection, "And once more")
        rows = await _rows(gw)
    assert created.type == "session.created" and created.session.model == "sim-pro"
    assert updated.type == "session.updated" and updated.session.instructions == "Answer briefly."
    for events in (first, second):
        kinds = [e.type for e in events]
        assert kinds[:2] == ["conversation.item.added", "conversation.item.done"]
        assert kinds.index("response.created") < kinds.index("response.output_text.delta")
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        done = events[-1].response
        assert done.status == "completed" and done.output[0].content[0].text == text
    usage = [events[-1].response.usage for events in (first, second)]
    assert [(r["prompt_tokens"], r["completion_tokens"]) for r in rows] == [
        (u.input_tokens, u.output_tokens) for u in usage
    ]
    assert all(r["status"] == "OK" and r["total_cost_usd"] > 0 for r in rows)
    # Every token of a text session is text; the second turn carried the first.
    assert usage[0].input_token_details.text_tokens == usage[0].input_tokens
    assert usage[0].output_token_details.audio_tokens == 0
    assert usage[1].input_tokens > usage[0].input_tokens + usage[0].output_tokens


async def test_a_function_call_and_its_output_make_the_next_response() -> None:
    async with running_gateway() as gw, _sdk(gw) as sdk:
        async with sdk.realtime.connect(model="sim-pro") as connection:
            await connection.session.update(
                session={"type": "realtime", "tools": [WEATHER], "tool_choice": "auto"}
            )
            called = await _say(connection, "What is the weather in Paris?")
            call = called[-1].response.output[0]
            await connection.conversation.item.create(item={
                "type": "function_call_output", "call_id": call.call_id,
                "output": json.dumps({"sky": "clear"}),
            })  # fmt: skip
            await connection.response.create()
            answered = await _until_done(connection)
        rows = await _rows(gw)
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments)["city"]
    deltas = [e for e in called if e.type == "response.function_call_arguments.delta"]
    assert deltas and all(e.call_id == call.call_id for e in deltas)
    assert "".join(e.delta for e in deltas) == call.arguments
    reply = answered[-1].response.output[0]
    assert reply.type == "message" and reply.content[0].text
    assert len(rows) == 2


async def test_audio_is_refused_by_name_and_the_session_goes_on() -> None:
    async with (
        running_gateway() as gw,
        _sdk(gw) as sdk,
        sdk.realtime.connect(model="sim-pro") as connection,
    ):
        await connection.recv()  # session.created
        await connection.session.update(
            session={"type": "realtime", "output_modalities": ["audio"]}
        )
        refused = await connection.recv()
        await connection.input_audio_buffer.append(audio="AAAA")
        appended = await connection.recv()
        answered = await _say(connection, "hello")
    assert refused.type == "error" and refused.error.param == "session.output_modalities"
    assert appended.type == "error" and appended.error.param == "type"
    assert answered[-1].response.status == "completed"


async def test_a_spent_budget_refuses_the_response_naming_its_level() -> None:
    data = default_config_dict()
    secret = "gw-test-poor-key-0000000000"
    data["keys"].append({"name": "poor", "kind": "api", "secret": secret, "budget_usd": 1e-9})
    async with running_gateway(data) as gw, _sdk(gw, secret) as sdk:
        async with sdk.realtime.connect(model="sim-pro") as connection:
            events = await _say(connection, "hello")
        rows = await _rows(gw)
    error = events[-1]
    assert error.type == "error" and error.error.code == "budget_exhausted"
    assert "key 'poor'" in error.error.message
    assert "response.created" not in [e.type for e in events]
    assert [r["status"] for r in rows] == ["RESOURCE_EXHAUSTED"]


def _url(gw: Any, model: str | None = "sim-pro") -> str:
    query = f"?model={model}" if model is not None else ""
    return f"ws://127.0.0.1:{gw.http_port}/v1/realtime{query}"


async def _refused(url: str, headers: dict[str, str] | None = None) -> Any:
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(url, additional_headers=headers or {}):
            pass
    return refused.value.response


async def test_every_refusal_is_an_http_answer_before_the_socket_opens() -> None:
    data = config_with()
    data["server"]["websockets"] = {"sessions_per_key": 1}
    bearer = {"Authorization": f"Bearer {API_KEY}"}
    async with running_gateway(data) as gw:
        admin = httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{gw.http_port}", headers={"x-admin-key": ADMIN_KEY}
        )
        async with admin:
            org = await admin.post("/v1/admin/orgs", json={"name": "rt", "limits": {}})
            team = await admin.post("/v1/admin/teams", json={
                "org_id": org.json()["org"]["id"], "name": "t", "limits": {"models": ["sim-mini"]}
            })  # fmt: skip
            key = await admin.post("/v1/admin/keys",
                                   json={"name": "k", "kind": "api", "team": team.json()["team"]["id"]})  # fmt: skip
            narrow = {"api-key": key.json()["secret"]}
        no_key = await _refused(_url(gw))
        wrong = await _refused(_url(gw), {"api-key": "gw-wrong-key-00000000000"})
        no_model = await _refused(_url(gw, None), bearer)
        unknown = await _refused(_url(gw, "no-such-model"), bearer)
        not_granted = await _refused(_url(gw), narrow)
        # The browser's way: the key in a subprotocol, the other subprotocol chosen.
        offered = ["realtime", f"openai-insecure-api-key.{API_KEY}"]
        async with websockets.connect(_url(gw), subprotocols=offered) as ws:  # type: ignore[arg-type]
            first = json.loads(await ws.recv())
            second = await _refused(_url(gw), bearer)
        async with websockets.connect(_url(gw, "sim-mini"), additional_headers=narrow) as its:
            allowed = json.loads(await its.recv())
    assert no_key.status_code == wrong.status_code == 401
    assert no_model.status_code == 400 and json.loads(no_model.body)["error"]["param"] == "model"
    assert unknown.status_code == 404
    assert not_granted.status_code == 403
    assert "not allowed for team 't'" in json.loads(not_granted.body)["error"]["message"]
    assert ws.subprotocol == "realtime" and first["type"] == "session.created"
    assert second.status_code == 429
    assert allowed["type"] == "session.created"


async def test_turned_off_the_upgrade_is_refused_with_426() -> None:
    data = default_config_dict()
    data["server"]["websockets"] = {"realtime": False}
    async with running_gateway(data) as gw:
        refused = await _refused(_url(gw), {"Authorization": f"Bearer {API_KEY}"})
    assert refused.status_code == 426


async def test_guardrails_see_a_session_s_text() -> None:
    data = default_config_dict()
    data["guardrails"] = [{"id": "pii", "detectors": ["email"], "on_input": "block"}]
    data["default_guardrails"] = ["pii"]
    async with (
        running_gateway(data) as gw,
        _sdk(gw) as sdk,
        sdk.realtime.connect(model="sim-pro") as connection,
    ):
        await connection.recv()  # session.created
        blocked = await _say(connection, "Write to jane.doe@example.com for me")
        # The item stays in the conversation until the client deletes it.
        await connection.conversation.item.delete(item_id=blocked[0].item.id)
        deleted = await connection.recv()
        clean = await _say(connection, "Say hello")
    assert blocked[-1].type == "error" and "email" in blocked[-1].error.message.lower()
    assert "response.created" not in [e.type for e in blocked]
    assert deleted.type == "conversation.item.deleted"
    assert clean[-1].type == "response.done" and clean[-1].response.status == "completed"


async def test_response_cancel_ends_the_response_under_way_and_its_row_is_written() -> None:
    data = default_config_dict()
    for provider in data["models"][0]["providers"]:
        provider["params"] = {"ttft_ms": 0, "tokens_per_second": 20,
                              "min_reply_tokens": 2000, "max_reply_tokens": 2000}  # fmt: skip
    model = data["models"][0]["id"]
    async with (
        running_gateway(data) as gw,
        _sdk(gw) as sdk,
        sdk.realtime.connect(model=model) as connection,
    ):
        await connection.recv()  # session.created
        await connection.conversation.item.create(item={
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Tell me a long story"}],
        })  # fmt: skip
        await connection.response.create()
        async for event in connection:
            if event.type == "response.output_text.delta":
                break
        # A frame sent while the response runs is taken after it, in order.
        await connection.session.update(session={"type": "realtime", "instructions": "Brief."})
        await connection.response.cancel()
        events = await _until_done(connection)
        updated = await connection.recv()
        rows = await _rows(gw)
    done = events[-1].response
    assert done.status == "cancelled" and done.status_details.reason == "client_cancelled"
    assert updated.type == "session.updated" and updated.session.instructions == "Brief."
    assert [r["status"] for r in rows] == ["CANCELLED"]


async def test_a_key_given_only_as_a_subprotocol_is_never_echoed() -> None:
    async with running_gateway() as gw:
        offered = [f"openai-insecure-api-key.{API_KEY}"]
        async with websockets.connect(_url(gw), subprotocols=offered) as ws:  # type: ignore[arg-type]
            created = json.loads(await ws.recv())
    assert created["type"] == "session.created"
    assert ws.subprotocol is None
    assert API_KEY not in str(ws.response.headers)

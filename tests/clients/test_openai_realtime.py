"""OpenAI's Realtime API (`GET /v1/realtime?model=`) through the openai SDK's
`realtime.connect()` on loopback: text turns remembered across a session, a function
call and its output, one ledger row per response.done with the usage it reported, a
budget refused per response naming its level; an audio turn heard and answered in
audio, its audio tokens apart in the usage and the ledger at their own prices; and every refusal of the upgrade, by raw
WebSocket frames, as an HTTP answer before the socket opens."""

from __future__ import annotations

import base64
import json
import struct
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


# Half a second of PCM16 at 24 kHz: 5 input audio tokens (one per 100 ms).
HALF_SECOND = bytes(range(256)) * (24_000 // 256) + bytes(24_000 % 256)


def _audio_priced() -> dict[str, Any]:
    data = default_config_dict()
    for model in data["models"]:
        if model["id"] == "sim-pro":
            model["price"] = {"input": 5.0, "output": 20.0, "cached_input": 2.5,
                              "audio_input": 32.0, "audio_output": 64.0}  # fmt: skip
    return data


async def _spoken_turn(connection: Any) -> tuple[list[Any], list[Any]]:
    """Half a second heard, in two appends, and the answer spoken."""
    await connection.session.update(session={
        "type": "realtime", "output_modalities": ["audio"],
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000},
                            "transcription": {"model": "whisper-1"}, "turn_detection": None}},
    })  # fmt: skip
    await connection.input_audio_buffer.append(
        audio=base64.b64encode(HALF_SECOND[:10_000]).decode()
    )
    await connection.input_audio_buffer.append(
        audio=base64.b64encode(HALF_SECOND[10_000:]).decode()
    )
    await connection.input_audio_buffer.commit()
    heard = []
    async for event in connection:
        heard.append(event)
        if event.type == "conversation.item.input_audio_transcription.completed":
            break
    await connection.response.create()
    return heard, await _until_done(connection)


async def test_an_audio_turn_is_heard_and_answered_in_audio_with_the_usage_split() -> None:
    async with running_gateway(_audio_priced()) as gw, _sdk(gw) as sdk:
        async with sdk.realtime.connect(model="sim-pro") as connection:
            await connection.recv()  # session.created
            heard, answered = await _spoken_turn(connection)
        async with sdk.realtime.connect(model="sim-pro") as again:
            await again.recv()
            heard_again, _ = await _spoken_turn(again)
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch(
            "SELECT prompt_tokens, completion_tokens, audio_input_tokens, audio_output_tokens, "
            "input_cost_usd, output_cost_usd, audio_input_cost_usd, audio_output_cost_usd, "
            "cache_input_cost_usd, total_cost_usd, cached_tokens FROM usage_records "
            "WHERE method = 'StreamResponse' ORDER BY ts"
        )
    kinds = [e.type for e in heard]
    assert kinds[1:4] == ["input_audio_buffer.committed", "conversation.item.added",
                          "conversation.item.done"]  # fmt: skip
    transcript = heard[-1].transcript
    assert heard[1].item_id == heard[-1].item_id == heard[2].item.id
    assert "500 milliseconds" in transcript and transcript == heard_again[-1].transcript
    # The answer: its transcript streamed, its audio PCM16 of the transcript's length.
    said = "".join(e.delta for e in answered if e.type == "response.output_audio_transcript.delta")
    done = [e for e in answered if e.type == "response.output_audio_transcript.done"]
    pcm = b"".join(
        base64.b64decode(e.delta) for e in answered if e.type == "response.output_audio.delta"
    )
    assert said and done[0].transcript == said
    assert "response.output_text.delta" not in [e.type for e in answered]
    assert "response.output_audio.done" in [e.type for e in answered]
    words = len(said.split())
    assert len(pcm) == words * 100 * 48  # 100 ms a word, 48 bytes a millisecond
    assert max(abs(s) for s in struct.unpack(f"<{len(pcm) // 2}h", pcm)) > 1000
    response = answered[-1].response
    assert response.status == "completed" and response.output_modalities == ["audio"]
    assert response.output[0].content[0].type == "output_audio"
    assert response.output[0].content[0].transcript == said
    usage = response.usage
    assert usage.input_token_details.audio_tokens == 5
    assert usage.output_token_details.audio_tokens == words * 2  # 50 ms a token
    assert usage.input_token_details.text_tokens == usage.input_tokens - 5
    assert usage.output_token_details.text_tokens == usage.output_tokens - words * 2
    # The ledger row: audio apart, each at its own price.
    row = rows[0]
    assert len(rows) == 2
    assert (row["prompt_tokens"], row["completion_tokens"]) == (
        usage.input_tokens,
        usage.output_tokens,
    )
    assert (row["audio_input_tokens"], row["audio_output_tokens"]) == (5, words * 2)
    assert row["audio_input_cost_usd"] == pytest.approx(5 * 32 / 1e6)
    assert row["audio_output_cost_usd"] == pytest.approx(words * 2 * 64 / 1e6)
    text_in = usage.input_tokens - 5 - row["cached_tokens"]
    text_out = usage.output_tokens - words * 2
    assert row["input_cost_usd"] == pytest.approx((text_in * 5 + 5 * 32) / 1e6)
    assert row["output_cost_usd"] == pytest.approx((text_out * 20 + words * 2 * 64) / 1e6)
    assert row["total_cost_usd"] == pytest.approx(
        row["input_cost_usd"] + row["output_cost_usd"] + (row["cache_input_cost_usd"] or 0)
    )


async def test_what_audio_cannot_be_honoured_is_refused_by_name_and_the_session_goes_on() -> None:
    async with (
        running_gateway() as gw,
        _sdk(gw) as sdk,
        sdk.realtime.connect(model="sim-pro") as connection,
    ):
        await connection.recv()  # session.created
        refusals = []
        for session in (
            {"type": "realtime", "output_modalities": ["text", "audio"]},
            {"type": "realtime", "audio": {"input": {"format": {"type": "audio/pcmu"}}}},
            {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad"}}}},
        ):
            await connection.session.update(session=session)  # type: ignore[arg-type]
            refusals.append(await connection.recv())
        await connection.input_audio_buffer.append(audio="not base64!")
        refusals.append(await connection.recv())
        await connection.input_audio_buffer.append(audio=base64.b64encode(b"\0" * 480).decode())
        await connection.input_audio_buffer.commit()  # 10 ms: too short
        refusals.append(await connection.recv())
        answered = await _say(connection, "hello")
    assert [e.type for e in refusals] == ["error"] * 5
    assert [e.error.param for e in refusals] == [
        "session.output_modalities", "session.audio.input.format",
        "session.audio.input.turn_detection", "audio", "audio",
    ]  # fmt: skip
    assert "100 ms" in refusals[-1].error.message
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


async def test_frames_past_the_key_s_rate_across_its_sessions_are_refused() -> None:
    data = default_config_dict()
    data["server"]["websockets"] = {"frames_per_s": 1000, "frames_per_s_per_key": 2}
    bearer = {"Authorization": f"Bearer {API_KEY}"}
    clear = json.dumps({"type": "input_audio_buffer.clear"})
    async with (
        running_gateway(data) as gw,
        websockets.connect(_url(gw), additional_headers=bearer) as first,
        websockets.connect(_url(gw), additional_headers=bearer) as second,
    ):
        answers = []
        for ws in (first, second):
            assert json.loads(await ws.recv())["type"] == "session.created"
            for _ in range(10):
                await ws.send(clear)
            answers += [json.loads(await ws.recv()) for _ in range(10)]
    # Each session alone is far under its own bound; together they pass the key's.
    refused = [a for a in answers if a["type"] == "error"]
    assert refused and all(a["status"] == 429 for a in refused)
    assert all("this key's sessions together" in a["error"]["message"] for a in refused)
    assert any(a["type"] == "input_audio_buffer.cleared" for a in answers)


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


async def test_a_spoken_turn_is_refused_over_rest_where_the_responses_api_has_no_audio() -> None:
    async with running_gateway() as gw, _sdk(gw) as sdk:
        with pytest.raises(openai.BadRequestError) as refused:
            await sdk.responses.create(
                model="sim-pro", input="hi",
                extra_body={"realtime_audio": {"output_audio": True}},
            )  # fmt: skip
    assert refused.value.body["param"] == "realtime_audio"  # type: ignore[index]


async def test_a_spoken_response_on_a_model_that_does_not_speak_is_an_error_naming_it() -> None:
    data = _audio_priced()
    for model in data["models"]:
        if model["id"] == "sim-pro":
            for provider in model["providers"]:
                provider["capabilities"] = ["tools"]  # no spoken_audio
    async with (
        running_gateway(data) as gw,
        _sdk(gw) as sdk,
        sdk.realtime.connect(model="sim-pro") as connection,
    ):
        await connection.recv()  # session.created
        await connection.session.update(
            session={"type": "realtime", "output_modalities": ["audio"]}
        )
        await connection.recv()  # session.updated
        refused = await _say(connection, "hello")
        await connection.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        await connection.recv()
        written = await _say(connection, "hello")
    error = refused[-1]
    assert error.type == "error" and error.error.param == "realtime_audio"
    assert "spoken_audio" in error.error.message
    assert "response.created" not in [e.type for e in refused]
    assert written[-1].response.status == "completed"

"""Gemini Live (`BidiGenerateContent` over WebSocket) through google-genai's
`client.aio.live.connect()` on loopback (behind a TLS front: the client dials its base
URL as wss): setup, text turns by clientContent and by realtimeInput, each answered
with modelTurn parts and a turnComplete with its usageMetadata, each one ledger row; a
model relayed to a Realtime upstream served the same way; the key checked before the
socket opens (header or `?key=`), a model the key cannot use closing the session with
its reason, by raw WebSocket frames."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import websockets
from google import genai
from google.genai import types
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.support.gateways import API_KEY, running_gateway
from tests.support.tls_front import tls_front
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.realtime import ANSWER, LiveUpstream, RealtimeUpstream

PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
TEXT = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])


@asynccontextmanager
async def _client(gw: Any) -> AsyncIterator[genai.Client]:
    async with tls_front(gw.http_port) as (port, trusted):
        options = types.HttpOptions(
            base_url=f"https://127.0.0.1:{port}", api_version="v1beta",
            async_client_args={"ssl": trusted},
        )  # fmt: skip
        yield genai.Client(api_key=API_KEY, http_options=options)


async def _turn(session: Any) -> tuple[str, Any]:
    text, usage = "", None
    async for message in session.receive():
        if message.text:
            text += message.text
        if message.usage_metadata is not None:
            usage = message.usage_metadata
        if message.server_content and message.server_content.turn_complete:
            break
    return text, usage


async def _rows(gw: Any, method: str) -> list[Any]:
    await gw.gateway.accounts.ledger.flush()
    return await gw.gateway.store.db.fetch(
        "SELECT status, prompt_tokens, completion_tokens FROM usage_records "
        "WHERE method = ? ORDER BY ts",
        method,
    )


async def test_text_turns_are_answered_and_each_is_one_ledger_row() -> None:
    async with running_gateway() as gw, _client(gw) as client:
        async with client.aio.live.connect(model="sim-pro", config=TEXT) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="Say hello")]),
                turn_complete=True,
            )
            first = await _turn(session)
            await session.send_realtime_input(text="And once more")
            second = await _turn(session)
        rows = await _rows(gw, "StreamResponse")
    for text, usage in (first, second):
        assert text.startswith("(simulated)")
        assert usage.total_token_count == usage.prompt_token_count + usage.response_token_count
    assert [(r["status"], r["prompt_tokens"], r["completion_tokens"]) for r in rows] == [
        ("OK", u.prompt_token_count, u.response_token_count) for _, u in (first, second)
    ]
    # The second turn carried the first.
    assert second[1].prompt_token_count > first[1].prompt_token_count


async def test_a_model_relayed_to_a_realtime_upstream_is_served_over_live() -> None:
    async with RealtimeUpstream().running() as fake:
        entry = provider("rt-up", "openai", fake.url, realtime_api=True)
        data = with_models(model("rt", entry))
        async with running_gateway(data) as gw, _client(gw) as client:
            async with client.aio.live.connect(model="rt", config=TEXT) as session:
                await session.send_client_content(
                    turns=types.Content(role="user", parts=[types.Part(text="Hi")])
                )
                text, usage = await _turn(session)
            rows = await _rows(gw, "RealtimeResponse")
    assert fake.problems == []
    assert text == "".join(ANSWER)
    assert (usage.prompt_token_count, usage.cached_content_token_count) == (120, 64)
    assert [(r["status"], r["prompt_tokens"]) for r in rows] == [("OK", 120)]


async def test_a_model_on_gemini_is_relayed_to_its_live_api_and_each_turn_metered() -> None:
    async with LiveUpstream().running() as fake:
        entry = provider("lv-up", "gemini", fake.url)
        price = {"input": 3.0, "output": 12.0, "cached_input": 0.3, "audio_input": 3.0,
                 "audio_output": 12.0, "cached_audio_input": 0.5}  # fmt: skip
        data = with_models(model("lv", entry, price=price))
        async with running_gateway(data) as gw, _client(gw) as client:
            answers = []
            async with client.aio.live.connect(model="lv", config=TEXT) as session:
                for text in ("Hi", "Again"):
                    await session.send_client_content(
                        turns=types.Content(role="user", parts=[types.Part(text=text)])
                    )
                    answers.append(await _turn(session))
            await gw.gateway.accounts.ledger.flush()
            rows = await gw.gateway.store.db.fetch(
                "SELECT * FROM usage_records WHERE method = 'RealtimeResponse'"
            )
    assert fake.problems == []
    assert API_KEY not in json.dumps(fake.upgrades) + json.dumps(fake.messages)
    assert [text for text, _ in answers] == ["".join(ANSWER)] * 2
    assert [usage.prompt_token_count for _, usage in answers] == [50, 50]
    assert len(rows) == 2 and {r["provider"] for r in rows} == {"lv-up"}
    row = rows[0]
    assert (row["prompt_tokens"], row["completion_tokens"], row["cached_tokens"]) == (50, 12, 20)
    assert (row["audio_input_tokens"], row["cached_audio_tokens"]) == (20, 8)
    assert row["cache_input_cost_usd"] == pytest.approx((12 * 0.3 + 8 * 0.5) / 1e6)


async def test_the_key_is_checked_before_the_socket_opens_and_the_model_after_setup() -> None:
    async with running_gateway() as gw:
        base = f"ws://127.0.0.1:{gw.http_port}{PATH}"
        with pytest.raises(InvalidStatus) as refused:
            async with websockets.connect(f"{base}?key=gw-wrong-key-00000000000"):
                pass
        async with websockets.connect(f"{base}?key={API_KEY}") as ws:
            await ws.send(json.dumps({"setup": {"model": "models/no-such-model"}}))
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
        async with websockets.connect(base, additional_headers={"x-goog-api-key": API_KEY}) as ws:
            await ws.send(json.dumps({"setup": {"model": "models/sim-pro"}}))
            ready = json.loads(await ws.recv())
            await ws.send(json.dumps({"realtimeInput": {"audio": {"data": "AAAA"}}}))
            with pytest.raises(ConnectionClosed) as audio:
                await ws.recv()
    assert refused.value.response.status_code == 401
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert "no-such-model" in closed.value.rcvd.reason
    assert ready == {"setupComplete": {}}
    assert audio.value.rcvd is not None and "realtimeInput.audio" in audio.value.rcvd.reason

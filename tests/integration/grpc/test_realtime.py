"""RealtimeService over gRPC: a Realtime session as a bidirectional stream, one event
a message, through a generated stub and through grpcurl (found by reflection). The
session is the WebSocket's: its turns, its ledger rows, its refusals before it opens,
its sessions counted with the key's WebSocket sessions, and a model whose upstream
serves the Realtime API relayed there."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import websockets
from gateway.v1 import realtime_service_pb2 as rt
from gateway.v1 import realtime_service_pb2_grpc
from google.protobuf import json_format, struct_pb2

from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.grpc_stubs import API
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.realtime import RealtimeUpstream

SAY = {"type": "conversation.item.create", "item": {
    "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hi"}]}}  # fmt: skip
RESPOND = {"type": "response.create", "response": {"max_output_tokens": 64}}


def _message(event: dict[str, Any], model: str = "") -> rt.ConverseRequest:
    return rt.ConverseRequest(model=model, event=json_format.ParseDict(event, struct_pb2.Struct()))


class _Session:
    """One Converse call: events sent as they are asked for, events read until one."""

    def __init__(self, stub: Any, model: str, metadata: Any = API) -> None:
        self.outbox: asyncio.Queue[rt.ConverseRequest | None] = asyncio.Queue()
        self.outbox.put_nowait(rt.ConverseRequest(model=model))
        self.call = stub.Converse(self._requests(), metadata=metadata)

    async def _requests(self) -> AsyncIterator[rt.ConverseRequest]:
        while (message := await self.outbox.get()) is not None:
            yield message

    def send(self, event: dict[str, Any]) -> None:
        self.outbox.put_nowait(_message(event))

    async def until(self, kind: str) -> list[dict[str, Any]]:
        events = []
        async for message in self.call:
            events.append(json_format.MessageToDict(message.event))
            if events[-1]["type"] in (kind, "error"):
                return events
        raise AssertionError(f"the stream ended before {kind}")


async def _rows(gw: Any, method: str) -> list[Any]:
    await gw.gateway.accounts.ledger.flush()
    return await gw.gateway.store.db.fetch(
        "SELECT status, prompt_tokens, completion_tokens FROM usage_records WHERE method = ?",
        method,
    )


async def test_a_text_session_over_a_stub_is_the_websocket_s_session() -> None:
    async with (
        running_gateway() as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        session = _Session(realtime_service_pb2_grpc.RealtimeServiceStub(channel), "sim-pro")
        created = await session.until("session.created")
        answers = []
        for _ in range(2):
            session.send(SAY)
            session.send(RESPOND)
            answers.append(await session.until("response.done"))
        session.outbox.put_nowait(None)
        rest = [m async for m in session.call]
        status = await session.call.code()
        rows = await _rows(gw, "StreamResponse")
    assert created[-1]["session"]["model"] == "sim-pro"
    for events in answers:
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        done = events[-1]["response"]
        assert done["status"] == "completed" and done["output"][0]["content"][0]["text"] == text
    usage = [events[-1]["response"]["usage"] for events in answers]
    assert [(r["prompt_tokens"], r["completion_tokens"]) for r in rows] == [
        (u["input_tokens"], u["output_tokens"]) for u in usage
    ]
    assert rest == [] and status == grpc.StatusCode.OK


async def test_refusals_end_the_call_before_the_session_opens() -> None:
    data = default_config_dict()
    data["server"]["websockets"] = {"sessions_per_key": 1}
    async with (
        running_gateway(data) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        stub = realtime_service_pb2_grpc.RealtimeServiceStub(channel)
        refused = {}
        for name, asked, metadata in (
            ("no key", "sim-pro", ()),
            ("no model", "", API),
            ("unknown model", "no-such-model", API),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await _Session(stub, asked, metadata).until("session.created")
            refused[name] = error.value.code()
        # The key's one session is open over WebSocket: none is left for gRPC.
        url = f"ws://127.0.0.1:{gw.http_port}/v1/realtime?model=sim-pro"
        async with websockets.connect(url, additional_headers={"x-api-key": API_KEY}) as ws:
            await ws.recv()
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await _Session(stub, "sim-pro").until("session.created")
            refused["sessions"] = error.value.code()
    assert refused == {
        "no key": grpc.StatusCode.UNAUTHENTICATED,
        "no model": grpc.StatusCode.INVALID_ARGUMENT,
        "unknown model": grpc.StatusCode.NOT_FOUND,
        "sessions": grpc.StatusCode.RESOURCE_EXHAUSTED,
    }


async def test_an_event_past_the_frame_bound_ends_the_session_as_a_websocket_frame_would() -> None:
    # The server takes messages as large as an upload (50 MB); an event is bounded by
    # server.websockets.max_frame_bytes, as the same event over WebSocket is.
    data = default_config_dict()
    data["server"]["websockets"] = {"max_frame_bytes": 4096}
    async with (
        running_gateway(data) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        session = _Session(realtime_service_pb2_grpc.RealtimeServiceStub(channel), "sim-pro")
        await session.until("session.created")
        big = json.loads(json.dumps(SAY))
        big["item"]["content"][0]["text"] = "x" * 5000
        session.send(big)
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await session.until("response.done")
    assert ended.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "exceeds 4096 bytes" in (ended.value.details() or "")


async def test_a_model_with_a_realtime_upstream_is_relayed_over_grpc_too() -> None:
    async with RealtimeUpstream().running() as fake:
        entry = provider("rt-up", "openai", fake.url, realtime_api=True)
        async with (
            running_gateway(with_models(model("rt", entry))) as gw,
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
        ):
            session = _Session(realtime_service_pb2_grpc.RealtimeServiceStub(channel), "rt")
            created = await session.until("session.created")
            session.send(SAY)
            session.send(RESPOND)
            events = await session.until("response.done")
            session.outbox.put_nowait(None)
            rows = await _rows(gw, "RealtimeResponse")
    assert fake.problems == []
    assert created[-1]["session"]["model"] == "rt"
    assert events[-1]["response"]["usage"]["input_tokens"] == 120
    assert [(r["status"], r["prompt_tokens"]) for r in rows] == [("OK", 120)]
    # The upstream got the response's bound as an integer, as the client sent it.
    assert [f["response"] for f in fake.frames if f["type"] == "response.create"] == [
        {"max_output_tokens": 64}
    ]


async def test_grpcurl_drives_a_text_session_found_by_reflection() -> None:
    # Beside the running interpreter: found from a copy of the tree too.
    grpcurl = Path(sys.executable).parent / "grpcurl"
    stream = "".join(
        json.dumps(m)
        for m in ({"model": "sim-pro"}, {"event": SAY}, {"event": {"type": "response.create"}})
    )
    async with running_gateway() as gw:
        process = await asyncio.create_subprocess_exec(
            str(grpcurl), "-plaintext", "-H", f"authorization: Bearer {API_KEY}", "-d", "@",
            f"127.0.0.1:{gw.grpc_port}", "gateway.v1.RealtimeService/Converse",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate(stream.encode())
        rows = await _rows(gw, "StreamResponse")
    assert process.returncode == 0, err
    decoder, text, events = json.JSONDecoder(), out.decode().strip(), []
    while text:
        event, end = decoder.raw_decode(text)
        events.append(event["event"])
        text = text[end:].strip()
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session.created" and kinds[-1] == "response.done"
    assert events[-1]["response"]["status"] == "completed"
    assert [r["status"] for r in rows] == ["OK"]

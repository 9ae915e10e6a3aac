"""MessagesService over gRPC: the same translation as REST, typed fields in place of
Anthropic's JSON shapes, errors as status codes with rich details."""

from __future__ import annotations

import grpc
import pytest
from gateway.v1 import messages_pb2 as pb
from gateway.v1 import messages_service_pb2 as service
from gateway.v1 import messages_service_pb2_grpc
from google.protobuf import struct_pb2

from tests.support.grpc_stubs import API, details

HELLO = [pb.MessageParam(role="user", content="Say hello.")]


@pytest.fixture
async def messages(gateway):  # type: ignore[no-untyped-def]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        yield messages_service_pb2_grpc.MessagesServiceStub(channel)


async def test_create_message(messages) -> None:  # type: ignore[no-untyped-def]
    reply = await messages.CreateMessage(
        service.CreateMessageRequest(model="sim-mini", max_tokens=200, messages=HELLO),
        metadata=API,
    )
    assert reply.id.startswith("msg_") and reply.type == "message"
    assert reply.content[0].type == "text" and reply.content[0].text.startswith("(simulated)")
    assert reply.stop_reason == "end_turn" and reply.stop_sequence == ""
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    assert reply.usage.HasField("total_cost_usd")


async def test_stream_message_with_a_tool(messages) -> None:  # type: ignore[no-untyped-def]
    schema = struct_pb2.Struct()
    schema.update({"type": "object", "properties": {"city": {"type": "string"}}})
    request = service.StreamMessageRequest(
        model="sim-mini",
        max_tokens=50,
        messages=HELLO,
        tools=[pb.MessageTool(name="get_weather", input_schema=schema)],
        tool_choice=pb.MessageToolChoice(type="tool", name="get_weather"),
    )
    events = [e async for e in messages.StreamMessage(request, metadata=API)]
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    start = events[1]
    assert start.content_block.type == "tool_use" and start.content_block.name == "get_weather"
    pieces = "".join(e.delta.partial_json for e in events if e.type == "content_block_delta")
    assert pieces.startswith("{")
    assert events[-2].message_delta.stop_reason == "tool_use"


async def test_count_message_tokens(messages) -> None:  # type: ignore[no-untyped-def]
    counted = await messages.CountMessageTokens(
        service.CountMessageTokensRequest(model="sim-mini", messages=HELLO), metadata=API
    )
    assert counted.input_tokens > 0 and counted.method == "estimate"


async def test_errors_name_the_field(messages) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await messages.CreateMessage(
            service.CreateMessageRequest(model="sim-mini", messages=HELLO), metadata=API
        )
    assert missing.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    found = details(missing.value)
    assert found["ErrorInfo"].metadata["field"] == "max_tokens"  # type: ignore[attr-defined]
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await messages.CreateMessage(
            service.CreateMessageRequest(model="nope", max_tokens=5, messages=HELLO), metadata=API
        )
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as no_key:
        await messages.CreateMessage(
            service.CreateMessageRequest(model="sim-mini", max_tokens=5, messages=HELLO)
        )
    assert no_key.value.code() == grpc.StatusCode.UNAUTHENTICATED

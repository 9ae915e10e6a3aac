"""ResponsesService over gRPC: typed events, stored responses, and the errors with
their rich status."""

from __future__ import annotations

import grpc
import pytest
from gateway.v1 import responses_pb2 as rpb
from gateway.v1 import responses_service_pb2 as rs
from gateway.v1 import responses_service_pb2_grpc
from google.protobuf import struct_pb2

from tests.support.grpc_stubs import API, details


@pytest.fixture
async def responses(gateway):  # type: ignore[no-untyped-def]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        yield responses_service_pb2_grpc.ResponsesServiceStub(channel)


async def test_create_get_list_delete(responses) -> None:  # type: ignore[no-untyped-def]
    made = await responses.CreateResponse(
        rs.CreateResponseRequest(model="sim-mini", input="Hello"), metadata=API
    )
    response = made.response
    assert response.status == "completed" and response.object == "response"
    assert response.output[0].WhichOneof("kind") == "message"
    assert response.output[0].message.content[0].text.startswith("(simulated)")
    assert response.usage.total_tokens > 0 and response.usage.HasField("total_cost_usd")
    got = await responses.GetResponse(rs.GetResponseRequest(response_id=response.id), metadata=API)
    assert got.response == response
    items = await responses.ListInputItems(
        rs.ListInputItemsRequest(response_id=response.id), metadata=API
    )
    assert [i.content_parts[0].text for i in items.data] == ["Hello"]
    deleted = await responses.DeleteResponse(
        rs.DeleteResponseRequest(response_id=response.id), metadata=API
    )
    assert deleted.deleted
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await responses.GetResponse(rs.GetResponseRequest(response_id=response.id), metadata=API)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_stream_with_a_function_call(responses) -> None:  # type: ignore[no-untyped-def]
    tool = struct_pb2.Struct()
    tool.update({"type": "function", "name": "lookup", "parameters": {"type": "object"}})
    request = rs.StreamResponseRequest(
        model="sim-mini", input_items=[rpb.InputItem(role="user", content="Look it up.")],
        tools=[tool],
    )  # fmt: skip
    events = [e async for e in responses.StreamResponse(request, metadata=API)]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created"
    assert events[0].WhichOneof("event") == "response_event"
    kinds = {e.type: e.WhichOneof("event") for e in events}
    assert kinds["response.function_call_arguments.delta"] == "delta"
    assert kinds["response.function_call_arguments.done"] == "arguments_done"
    final = events[-1]
    assert final.type == "response.completed"
    assert final.response_event.response.output[0].function_call.name == "lookup"


async def test_errors(responses) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await responses.CreateResponse(rs.CreateResponseRequest(model="sim-mini", input="x"))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await responses.CreateResponse(
            rs.CreateResponseRequest(model="sim-mini", input="x", max_output_tokens=3),
            metadata=API,
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    violation = details(caught.value)["BadRequest"].field_violations[0]  # type: ignore[attr-defined]
    assert violation.field == "max_output_tokens"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await responses.CreateResponse(
            rs.CreateResponseRequest(model="sim-mini", input="x", previous_response_id="resp_x"),
            metadata=API,
        )
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_number_json_cannot_hold_is_invalid_naming_the_field(responses) -> None:  # type: ignore[no-untyped-def]
    """gRPC carries NaN and Infinity in a Struct; JSON, and so every upstream, cannot."""
    tool = struct_pb2.Struct()
    tool.update({"type": "function", "name": "f", "parameters": {"type": "object"}})
    tool.fields["parameters"].struct_value.fields["maxProperties"].number_value = float("nan")
    choice = struct_pb2.Struct()
    choice.update({"type": "function", "name": "f"})
    choice.fields["weight"].number_value = float("inf")
    for request, field in (
        (rs.CreateResponseRequest(model="sim-mini", input="x", tools=[tool]), "tools[0]"),
        (rs.CreateResponseRequest(model="sim-mini", input="x", tool_choice_object=choice),
         "tool_choice"),
    ):  # fmt: skip
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await responses.CreateResponse(request, metadata=API)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        violation = details(caught.value)["BadRequest"].field_violations[0]  # type: ignore[attr-defined]
        assert violation.field == field and "not finite" in caught.value.details()

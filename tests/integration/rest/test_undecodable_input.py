"""Text that is not valid Unicode and messages that do not decode: a 400 /
INVALID_ARGUMENT naming the field, before authentication, with nothing logged
(issue 12, item 3), and gRPC request ids checked as REST checks them (item 7)."""

from __future__ import annotations

import logging

import grpc
import httpx
import pytest
from gateway.v1 import chat_service_pb2 as chat

from tests.support.gateways import default_config_dict, running_gateway
from tests.support.grpc_stubs import API, Stubs, details

# (path, raw JSON body, the field the 400 must name); no key header is sent at all.
BAD_UNICODE = [
    (
        "/v1/chat/completions",
        '{"model": "sim-mini", "messages": [{"role": "user", "content": "a\\ud800"}]}',
        "messages[0].content",
    ),
    ("/v1/chat/completions", '{"model": "\\udfff", "messages": []}', "model"),
    (
        "/v1/chat/completions",
        '{"model": "m", "stream": true, "messages": [], "stop": ["x", "\\ud83d"]}',
        "stop[1]",
    ),
    ("/v1/completions", '{"model": "sim-mini", "prompt": "\\ud800\\ud800"}', "prompt"),
    ("/v1/completions", '{"model": "sim-mini", "prompt": "\\ud800", "stream": true}', "prompt"),
    ("/v1/infer", '{"prompt": "\\ud800", "profile": "economy"}', "prompt"),
    ("/v1/infer", '{"prompt": "p", "profile": "\\ud800", "stream": true}', "profile"),
    ("/v1/deployments/summarizer/invoke", '{"inputs": "\\udc00"}', "inputs"),
    ("/v1/deployments/summarizer/invoke", '{"prompt": "\\udc00", "stream": true}', "prompt"),
]


@pytest.fixture(scope="module")
async def gateway():
    async with running_gateway(default_config_dict()) as gw:
        yield gw


@pytest.mark.parametrize("path, body, field", BAD_UNICODE)
async def test_an_unpaired_surrogate_is_a_400_naming_the_field(gateway, caplog, path, body, field):
    caplog.set_level(logging.INFO)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.http_port}") as client:
        reply = await client.post(path, content=body, headers={"content-type": "application/json"})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == field and "Unicode" in error["message"], error
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]


def _raw_call(channel: grpc.aio.Channel, path: str):  # type: ignore[no-untyped-def]
    return channel.unary_unary(path, request_serializer=lambda b: b, response_deserializer=bytes)


async def test_undecodable_grpc_messages_are_invalid_argument(gateway, caplog):
    caplog.set_level(logging.INFO)
    good = chat.CreateChatCompletionRequest(
        model="sim-mini", messages=[chat.ChatMessage(role="user", content="hé")]
    ).SerializeToString()
    bad_utf8 = good.replace("hé".encode(), b"h\xff")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        call = _raw_call(channel, "/gateway.v1.ChatService/CreateChatCompletion")
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await call(bad_utf8, metadata=API)
        assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        found = details(failed.value)
        assert found["BadRequest"].field_violations[0].field == "messages[0].content"  # type: ignore[attr-defined]
        for junk in (b"\x0a\xff\xff", b"\xff" * 64, bytes(range(256))):
            for path in (
                "/gateway.v1.ChatService/CreateChatCompletion",
                "/gateway.v1.ChatService/StreamChatCompletion",
                "/gateway.v1.RouterService/Infer",
            ):
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    if "Stream" in path:
                        stream = channel.unary_stream(
                            path, request_serializer=lambda b: b, response_deserializer=bytes
                        )
                        async for _ in stream(junk, metadata=API):
                            pass
                    else:
                        await _raw_call(channel, path)(junk, metadata=API)
                assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT, path
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]


async def test_grpc_request_ids_are_checked_like_rest_ones(gateway):
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        stubs = Stubs(channel)
        request = chat.CreateChatCompletionRequest(
            model="sim-mini", messages=[chat.ChatMessage(role="user", content="hi")]
        )
        for asked, kept in (("req-ok.1:2", True), ("not ok; DROP", False), ("x" * 200, False)):
            reply = await stubs.chat.CreateChatCompletion(
                request, metadata=(*API, ("x-request-id", asked))
            )
            assert (reply.id == f"chatcmpl-{asked}") is kept, reply.id
            assert reply.id.startswith("chatcmpl-")


@pytest.mark.parametrize(
    "body",
    [
        '{"model": "sim-mini", "messages": [{"role": "user", "content": "x"}], "\\ud800": 1}',
        '{"model": "sim-mini", "messages": [{"role": "user", "content": "x", "\\udc00": 2}]}',
    ],
)
async def test_an_unpaired_surrogate_in_a_key_is_a_400(gateway, caplog, body):
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.http_port}") as client:
        reply = await client.post(
            "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
        )
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert not [r for r in caplog.records if r.exc_info]

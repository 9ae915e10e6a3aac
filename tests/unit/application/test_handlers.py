"""The core's handlers with no transport at all: proto requests in, proto responses
(or chunks) and typed errors out, through the same pipeline both transports use."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import model_service_pb2 as models
from gateway.v1 import router_service_pb2 as router

from server.application import rpcs
from server.base.call import Call
from server.base.config import parse
from server.base.errors import Code, GatewayError, InvalidArgument, NotFound, Unauthenticated
from server.base.pipeline import Middleware, RpcMethod, StreamHandler, UnaryHandler
from server.cli.serve import Gateway, build_gateway
from server.routing.router import Route
from tests.support.gateways import API_KEY, ROUTER_KEY, default_config_dict

API = {"x-api-key": API_KEY}
ROUTER = {"x-router-key": ROUTER_KEY}
HELLO = [chat.ChatMessage(role="user", content="Hello")]


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    gw = build_gateway(parse(default_config_dict(), "test"))
    try:
        yield gw
    finally:
        await gw.aclose()


def rpc(gateway: Gateway, name: str) -> RpcMethod:
    return next(m for m in gateway.table.values() if m.name == name)


async def test_chat_completion_without_a_transport(gateway: Gateway) -> None:
    request = chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO)
    call = Call(API)
    response = await rpc(gateway, "CreateChatCompletion").unary(request, call)
    assert response.object == "chat.completion"
    assert response.choices[0].message.content.startswith("(simulated)")
    assert response.usage.total_tokens == response.usage.prompt_tokens + (
        response.usage.completion_tokens
    )
    assert call.record.principal is not None
    assert call.response_metadata["x-ratelimit-limit-requests"] == "600"


async def test_stream_without_a_transport(gateway: Gateway) -> None:
    request = chat.StreamChatCompletionRequest(model="sim-mini", messages=HELLO)
    chunks = [c async for c in rpc(gateway, "StreamChatCompletion").stream(request, Call(API))]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    assert len({c.id for c in chunks}) == 1


@pytest.mark.parametrize(
    ("name", "request_", "metadata", "error", "reason"),
    [
        ("CreateChatCompletion", chat.CreateChatCompletionRequest(model="nope", messages=HELLO),
         API, NotFound, "MODEL_NOT_FOUND"),
        ("CreateChatCompletion", chat.CreateChatCompletionRequest(
            model="sim-mini", messages=HELLO, temperature=3), API, InvalidArgument,
         "INVALID_ARGUMENT"),
        ("ListModels", models.ListModelsRequest(), {}, Unauthenticated, "UNAUTHENTICATED"),
        ("Infer", router.InferRequest(prompt="Hi"), API, Unauthenticated, "UNAUTHENTICATED"),
    ],
)  # fmt: skip
async def test_errors_are_typed(
    gateway: Gateway, name: str, request_: Any, metadata: dict[str, str], error: type, reason: str
) -> None:
    with pytest.raises(error) as raised:
        await rpc(gateway, name).unary(request_, Call(metadata))
    assert raised.value.reason == reason


async def test_infer_asks_the_router_and_reports_its_decision(gateway: Gateway) -> None:
    class Reversed:
        def route(
            self,
            request: Any,
            profile: str,
            budget_usd: float | None = None,
            asker: str = "",
            tags: Sequence[str] = (),
        ) -> Route:
            return Route(profile, ("sim-pro", "sim-mini"), reason="reversed")

    live = gateway.live
    live.current = dataclasses.replace(live.current, router=Reversed())
    response = await rpc(gateway, "Infer").unary(
        router.InferRequest(prompt="Hi", profile="economy"), Call(ROUTER)
    )
    assert response.model == "sim-pro"
    assert response.route.profile == "economy"
    assert response.route.reason == "reversed"
    assert response.route.provider == "sim-pro-primary"


async def test_middlewares_wrap_every_rpc_in_order(gateway: Gateway) -> None:
    seen: list[str] = []

    class Record(Middleware):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        def wrap_unary(self, method: Any, handler: UnaryHandler) -> UnaryHandler:
            async def unary(request: Any, call: Call) -> Any:
                seen.append(f"{self.tag}:{method.name}")
                return await handler(request, call)

            return unary

        def wrap_stream(self, method: Any, handler: StreamHandler) -> StreamHandler:
            async def stream(request: Any, call: Call) -> Any:
                seen.append(f"{self.tag}:{method.name}")
                async for chunk in handler(request, call):
                    yield chunk

            return stream

    table = rpcs.table(gateway.services, [*gateway.middlewares, Record("outer"), Record("inner")])
    assert {m.descriptor.full_name for m in table.values()} == set(rpcs.handlers(gateway.services))
    by_name = {m.name: m for m in table.values()}
    await by_name["ListModels"].unary(models.ListModelsRequest(), Call(API))
    stream = by_name["StreamChatCompletion"].stream(
        chat.StreamChatCompletionRequest(model="sim-mini", messages=HELLO), Call(API)
    )
    _ = [c async for c in stream]
    with pytest.raises(GatewayError) as raised:  # admin RPCs go through them too
        await by_name["ListKeys"].unary(by_name["ListKeys"].request_type(), Call({}))
    assert raised.value.code == Code.UNAUTHENTICATED
    assert seen == [
        "outer:ListModels", "inner:ListModels",
        "outer:StreamChatCompletion", "inner:StreamChatCompletion",
        "outer:ListKeys", "inner:ListKeys",
    ]  # fmt: skip

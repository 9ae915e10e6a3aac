"""Tracing into an in-memory exporter: one span per call under the caller's trace
(HTTP traceparent, gRPC metadata, through the edge tier), children for admission,
routing, each upstream attempt and the ledger write, and the trace passed upstream."""

from __future__ import annotations

import grpc
import httpx
import pytest
from gateway.v1 import chat_service_pb2 as chat
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from server.base import spans as span_hook
from server.ops import tracing
from tests.support.gateways import API_KEY, ROUTER_KEY, running_gateway
from tests.support.grpc_stubs import Stubs
from tests.support.upstreams.base import Fault, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    yield exporter
    tracing.enable(None)


def hexid(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def tree(exporter: InMemorySpanExporter):  # type: ignore[no-untyped-def]
    """The finished spans of the test trace: the root call spans and their children."""
    found = [s for s in exporter.get_finished_spans() if hexid(s.context.trace_id, 32) == TRACE_ID]
    return found


async def test_a_call_span_with_its_children_under_the_callers_trace(spans):
    async with (
        serving(OpenAIWire(), default=Fault("status", 500)) as broken,
        serving(OpenAIWire()) as good,
    ):
        data = with_models(
            model(
                "traced",
                provider("t-broken", "openai", broken.url, max_retries=1, backoff_s=0.01),
                provider("t-good", "openai", good.url, "backup"),
            )
        )
        async with (
            running_gateway(data) as gw,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as rest,
        ):
            reply = await rest.post(
                "/v1/chat/completions",
                json={"model": "traced", "messages": [{"role": "user", "content": "hi"}]},
                headers={"x-api-key": API_KEY, "traceparent": TRACEPARENT},
            )
            assert reply.status_code == 200, reply.text
    found = tree(spans)
    by_name: dict[str, list] = {}
    for s in found:
        by_name.setdefault(s.name, []).append(s)
    (root,) = by_name["gateway.v1.ChatService/CreateChatCompletion"]
    assert hexid(root.parent.span_id, 16) == PARENT_ID and root.parent.is_remote
    assert root.attributes["gen_ai.provider.name"] == "t-good"
    assert (
        root.attributes["gen_ai.usage.output_tokens"] == reply.json()["usage"]["completion_tokens"]
    )
    assert root.attributes["gateway.key_id"] == "cfg-dev-api"
    children = [
        s for s in found if s.parent is not None and s.parent.span_id == root.context.span_id
    ]
    names = [s.name for s in children]
    assert "gateway.admission.identify" in names and "gateway.admission.limit" in names
    assert "gateway.ledger.write" in names
    attempts = [s for s in children if s.name == "gateway.upstream.attempt"]
    # The broken provider tried twice (one retry), then the backup once.
    assert [(a.attributes["gen_ai.provider.name"], a.attributes["gateway.attempt"])
            for a in attempts] == [("t-broken", 1), ("t-broken", 2), ("t-good", 1)]  # fmt: skip
    assert not attempts[1].status.is_ok and attempts[2].status.is_ok
    # Each upstream saw the trace, as a child of its own attempt span.
    for upstream, span in ((broken, attempts[1]), (good, attempts[2])):
        sent = upstream.seen[-1].headers["traceparent"]
        assert sent == f"00-{TRACE_ID}-{hexid(span.context.span_id, 16)}-01"


async def test_streams_over_grpc_and_the_edge_tier_keep_the_trace(spans, config_dict):
    config_dict["routing"]["policy"] = "ordered"  # quality: sim-pro first
    async with running_gateway(config_dict) as gw:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            stream = Stubs(channel).chat.StreamChatCompletion(
                chat.StreamChatCompletionRequest(
                    model="sim-mini", messages=[chat.ChatMessage(role="user", content="hi")]
                ),
                metadata=(("x-api-key", API_KEY), ("traceparent", TRACEPARENT)),
            )
            assert [c async for c in stream][-1].choices[0].finish_reason == "stop"
        async with (
            running_gateway(config_dict, grpc_target=f"127.0.0.1:{gw.grpc_port}") as edge,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{edge.http_port}") as rest,
        ):
            routed = await rest.post(
                "/v1/infer",
                json={"prompt": "hi", "profile": "quality", "stream": True},
                headers={"x-router-key": ROUTER_KEY, "traceparent": TRACEPARENT},
            )
            assert routed.text.rstrip().endswith("data: [DONE]")
    found = tree(spans)
    roots = [s for s in found if s.parent is not None and hexid(s.parent.span_id, 16) == PARENT_ID]
    assert sorted(s.name for s in roots) == [
        "gateway.v1.ChatService/StreamChatCompletion",
        "gateway.v1.RouterService/StreamInfer",
    ]
    infer = next(s for s in roots if s.name.endswith("StreamInfer"))
    children = {s.name: s for s in found if s.parent and s.parent.span_id == infer.context.span_id}
    assert children["gateway.routing"].attributes["gateway.profile"] == "quality"
    assert (
        children["gateway.upstream.attempt"].attributes["gen_ai.provider.name"] == "sim-pro-primary"
    )
    assert infer.attributes["gen_ai.response.model"] == "sim-pro"


async def test_tracing_is_off_by_default():
    assert not tracing.enabled()
    async with serving(OpenAIWire()) as upstream:
        data = with_models(model("plain", provider("p-openai", "openai", upstream.url)))
        async with running_gateway(data) as gw:
            # Off, every span the layers open is the one shared no-op.
            assert span_hook.span("gateway.admission.identify") is span_hook.span("other")
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as rest:
                reply = await rest.post(
                    "/v1/chat/completions",
                    json={"model": "plain", "messages": [{"role": "user", "content": "hi"}]},
                    headers={"x-api-key": API_KEY, "traceparent": TRACEPARENT},
                )
                assert reply.status_code == 200
    assert "traceparent" not in upstream.seen[-1].headers


async def test_a_responses_continuation_identifies_its_key_once(spans, config_dict):
    """The stored response is read with the key the call was admitted with: the caller
    is identified once, not again by the generation that follows."""
    async with (
        running_gateway(config_dict) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as rest,
    ):
        headers = {"x-api-key": API_KEY}
        first = await rest.post(
            "/v1/responses", json={"model": "sim-mini", "input": "hi"}, headers=headers
        )
        assert first.status_code == 200, first.text
        reply = await rest.post(
            "/v1/responses",
            json={"model": "sim-mini", "input": "and?", "previous_response_id": first.json()["id"]},
            headers={**headers, "traceparent": TRACEPARENT},
        )
        assert reply.status_code == 200, reply.text
    found = tree(spans)
    (root,) = [s for s in found if s.name == "gateway.v1.ResponsesService/CreateResponse"]
    children = [s.name for s in found if s.parent and s.parent.span_id == root.context.span_id]
    assert children.count("gateway.admission.identify") == 1, children

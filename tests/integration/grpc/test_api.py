"""The gRPC API end to end: real grpc.aio server on a loopback port, real stubs."""

from __future__ import annotations

import json

import grpc
import pytest
from gateway.v1 import (
    chat_service_pb2 as chat,
)
from gateway.v1 import (
    completion_service_pb2 as completion,
)
from gateway.v1 import (
    deployment_service_pb2 as deployment,
)
from gateway.v1 import (
    model_service_pb2 as models,
)
from gateway.v1 import (
    provider_service_pb2 as providers,
)
from gateway.v1 import (
    router_service_pb2 as router,
)
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.grpc_stubs import API, ROUTER, details

HELLO = [chat.ChatMessage(role="user", content="hello")]


async def test_chat_completion_carries_text_usage_and_cost(stubs):
    response = await stubs.chat.CreateChatCompletion(
        chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO), metadata=API
    )
    assert response.object == "chat.completion"
    assert response.id.startswith("chatcmpl-")
    assert response.model == "sim-mini"
    choice = response.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content.startswith("(simulated)")
    assert choice.finish_reason == "stop"
    usage = response.usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens > 0
    # sim-mini costs $0.15 / $0.60 per million input / output tokens.
    assert usage.input_cost_usd == pytest.approx(usage.prompt_tokens * 0.15e-6)
    assert usage.output_cost_usd == pytest.approx(usage.completion_tokens * 0.60e-6)
    assert usage.total_cost_usd == pytest.approx(usage.input_cost_usd + usage.output_cost_usd)
    assert not usage.HasField("cache_input_cost_usd")
    assert usage.HasField("ttft_ms") and 0 <= usage.ttft_ms <= usage.latency_ms


async def test_stream_sends_role_content_then_finish(stubs):
    request = chat.StreamChatCompletionRequest(
        model="sim-standard", messages=HELLO, max_tokens=5, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stubs.chat.StreamChatCompletion(request, metadata=API)]
    assert len({c.id for c in chunks}) == 1
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    first, *middle, last, usage = chunks
    assert first.choices[0].delta.role == "assistant"
    assert not first.choices[0].delta.HasField("content")
    # Five tokens' text, in as many chunks or fewer: fragments ready together merge.
    assert 1 <= len(middle) <= 5
    assert all([f.name for f, _ in c.choices[0].delta.ListFields()] == ["content"] for c in middle)
    assert not last.choices[0].delta.HasField("content")
    assert last.choices[0].finish_reason == "length"
    # Usage comes on a message of its own, with no choices, after the finish.
    assert not usage.choices and usage.usage.completion_tokens == 5
    assert all(not c.HasField("usage") for c in chunks[:-1])


async def test_stream_without_include_usage_has_no_usage(stubs):
    request = chat.StreamChatCompletionRequest(model="sim-mini", messages=HELLO)
    chunks = [c async for c in stubs.chat.StreamChatCompletion(request, metadata=API)]
    assert not any(c.HasField("usage") for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_text_completion_usage_has_no_ttft(stubs):
    response = await stubs.completions.CreateCompletion(
        completion.CreateCompletionRequest(model="sim-pro", prompt="Once upon a time"),
        metadata=API,
    )
    assert response.object == "text_completion"
    assert response.choices[0].text.startswith("(simulated)")
    assert not response.usage.HasField("ttft_ms")
    assert response.usage.total_cost_usd > 0


async def test_stop_sequence_cuts_the_reply(stubs):
    full = await stubs.completions.CreateCompletion(
        completion.CreateCompletionRequest(model="sim-mini", prompt="abc"), metadata=API
    )
    word = full.choices[0].text.split()[3]
    cut = await stubs.completions.CreateCompletion(
        completion.CreateCompletionRequest(model="sim-mini", prompt="abc", stop=[word]),
        metadata=API,
    )
    assert word not in cut.choices[0].text
    assert full.choices[0].text.startswith(cut.choices[0].text)
    assert cut.choices[0].finish_reason == "stop"


async def test_list_models_and_providers(stubs):
    listed = await stubs.models.ListModels(models.ListModelsRequest(), metadata=API)
    assert listed.object == "list"
    assert [m.id for m in listed.data] == [
        "sim-mini",
        "sim-standard",
        "sim-pro",
        "sim-embed",
        "sim-rerank",
        "sim-moderation",
        "sim-audio",
        "sim-image",
    ]
    assert all(m.object == "model" and m.owned_by == "simulated" for m in listed.data)
    found = await stubs.providers.ListProviders(
        providers.ListProvidersRequest(model="sim-mini"), metadata=API
    )
    assert [(p.id, p.type, p.enabled) for p in found.providers] == [
        ("sim-mini-primary", "primary", True),
        ("sim-mini-backup", "backup", True),
    ]
    assert found.providers[0].adapter == "simulated"
    assert found.providers[0].health == "healthy"


@pytest.mark.parametrize(
    ("profile", "models"),
    [
        (None, {"sim-standard", "sim-mini", "sim-pro"}),
        ("economy", {"sim-mini", "sim-standard"}),
        ("quality", {"sim-pro", "sim-standard"}),
    ],
)
async def test_infer_routes_by_profile(stubs, profile, models):
    # Which model of the profile serves depends on the prompt (tests/integration/routing/test_routing.py).
    request = router.InferRequest(prompt="Summarize this")
    if profile:
        request.profile = profile
    response = await stubs.router.Infer(request, metadata=ROUTER)
    assert response.model in models
    assert response.route.profile == (profile or "balanced")
    assert response.route.model == response.model
    assert response.choices[0].text


async def test_stream_infer_announces_route_first(stubs):
    request = router.StreamInferRequest(prompt="hi", profile="economy", max_tokens=3)
    chunks = [c async for c in stubs.router.StreamInfer(request, metadata=ROUTER)]
    assert chunks[0].route.model == "sim-mini"
    assert not any(c.HasField("route") for c in chunks[1:])
    assert chunks[-1].choices[0].finish_reason == "length"


async def test_deployments_in_both_formats(stubs):
    listed = await stubs.deployments.ListDeployments(
        deployment.ListDeploymentsRequest(), metadata=ROUTER
    )
    assert [(d.id, d.model) for d in listed.data][0] == ("summarizer", "sim-mini")
    common = await stubs.deployments.InvokeDeployment(
        deployment.InvokeDeploymentRequest(deployment_id="analyst", prompt="hi"), metadata=ROUTER
    )
    assert common.model == "sim-pro" and common.deployment_id == "analyst"
    assert not common.HasField("generated_text")
    alternative = await stubs.deployments.InvokeDeployment(
        deployment.InvokeDeploymentRequest(
            deployment_id="analyst", inputs="hi", parameters={"max_new_tokens": 4}
        ),
        metadata=ROUTER,
    )
    assert alternative.generated_text == alternative.choices[0].text
    assert alternative.details.finish_reason == "length"
    assert alternative.details.generated_tokens == 4


async def test_stream_deployment_inputs_sends_tokens_then_generated_text(stubs):
    request = deployment.StreamInvokeDeploymentRequest(
        deployment_id="summarizer", inputs="hi", parameters={"max_new_tokens": 3}
    )
    chunks = [c async for c in stubs.deployments.StreamInvokeDeployment(request, metadata=ROUTER)]
    tokens = [c.token for c in chunks if c.HasField("token")]
    assert [t.id for t in tokens] == [0, 1, 2]
    assert chunks[-1].generated_text == "".join(t.text for t in tokens)
    assert chunks[-1].details.generated_tokens == 3


# -- errors -------------------------------------------------------------------------


async def _error(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


@pytest.mark.parametrize("metadata", [(), (("x-api-key", "wrong-key-000000000000"),), ROUTER])
async def test_bad_or_missing_api_key_is_unauthenticated(stubs, metadata):
    error = await _error(stubs.models.ListModels(models.ListModelsRequest(), metadata=metadata))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert details(error)["ErrorInfo"].reason == "UNAUTHENTICATED"


async def test_api_key_is_not_a_router_key(stubs):
    error = await _error(
        stubs.router.Infer(
            router.InferRequest(prompt="hi"), metadata=(("x-router-key", API[0][1]),)
        )
    )
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (
            chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO, temperature=2.5),
            "temperature",
        ),
        (chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO, top_p=1.5), "top_p"),
        (
            chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO, max_tokens=0),
            "max_tokens",
        ),
        (chat.CreateChatCompletionRequest(model="sim-mini"), "messages"),
        (chat.CreateChatCompletionRequest(messages=HELLO), "model"),
        (
            chat.CreateChatCompletionRequest(
                model="sim-mini", messages=[chat.ChatMessage(role="robot", content="x")]
            ),
            "messages[0].role",
        ),
    ],
)
async def test_out_of_range_parameters_name_the_field(stubs, request_, field):
    error = await _error(stubs.chat.CreateChatCompletion(request_, metadata=API))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    found = details(error)
    assert found["BadRequest"].field_violations[0].field == field
    assert found["ErrorInfo"].metadata["field"] == field


async def test_interface_b_temperature_range_is_0_to_1(stubs):
    error = await _error(
        stubs.router.Infer(router.InferRequest(prompt="hi", temperature=1.5), metadata=ROUTER)
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "temperature" in error.details()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"prompt": "a", "inputs": "b"}, "inputs"),
        ({}, "prompt"),
        ({"inputs": "a", "parameters": {"temperature": 1.2}}, "parameters.temperature"),
        ({"inputs": "a", "max_tokens": 3}, "max_tokens"),
    ],
)
async def test_deployment_request_formats_are_exclusive(stubs, fields, field):
    request = deployment.InvokeDeploymentRequest(deployment_id="analyst", **fields)
    error = await _error(stubs.deployments.InvokeDeployment(request, metadata=ROUTER))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(error)["BadRequest"].field_violations[0].field == field


async def test_unknown_model_and_deployment_are_not_found(stubs):
    error = await _error(
        stubs.chat.CreateChatCompletion(
            chat.CreateChatCompletionRequest(model="nope", messages=HELLO), metadata=API
        )
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert details(error)["ErrorInfo"].metadata["model"] == "nope"
    error = await _error(
        stubs.deployments.InvokeDeployment(
            deployment.InvokeDeploymentRequest(deployment_id="nope", prompt="x"), metadata=ROUTER
        )
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND


async def test_health_and_reflection_services_answer(gateway):
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "gateway.v1.ChatService"):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_tools_and_content_parts_over_grpc(stubs) -> None:  # type: ignore[no-untyped-def]
    """gRPC callers get what REST callers get: content parts, tools, tool calls."""
    from gateway.v1 import chat_pb2
    from google.protobuf import struct_pb2

    parameters = struct_pb2.Struct()
    parameters.update({"type": "object", "properties": {"q": {"type": "string"}},
                       "required": ["q"]})  # fmt: skip
    tool = chat_pb2.Tool(
        type="function", function=chat_pb2.FunctionDefinition(name="search", parameters=parameters)
    )
    image = chat_pb2.ContentPart(
        type="image_url", image_url=chat_pb2.ImageUrl(url="https://example.com/a.png")
    )
    question = chat.ChatMessage(
        role="user", content_parts=[chat_pb2.ContentPart(type="text", text="find"), image]
    )
    reply = await stubs.chat.CreateChatCompletion(
        chat.CreateChatCompletionRequest(model="sim-mini", messages=[question], tools=[tool]),
        metadata=API,
    )
    (choice,) = reply.choices
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "search" and isinstance(
        json.loads(call.function.arguments)["q"], str
    )
    result = chat.ChatMessage(role="tool", content="found", tool_call_id=call.id)
    chunks = [
        c
        async for c in stubs.chat.StreamChatCompletion(
            chat.StreamChatCompletionRequest(
                model="sim-mini", messages=[question, choice.message, result], tools=[tool]
            ),
            metadata=API,
        )
    ]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert "".join(c.choices[0].delta.content for c in chunks).startswith("(simulated)")


async def test_text_ready_together_goes_out_in_fewer_messages(stubs):
    # The simulated upstream answers at once: its fifty tokens are ready together.
    request = chat.StreamChatCompletionRequest(model="sim-mini", messages=HELLO, max_tokens=50)
    chunks = [c async for c in stubs.chat.StreamChatCompletion(request, metadata=API)]
    unary = await stubs.chat.CreateChatCompletion(
        chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO, max_tokens=50),
        metadata=API,
    )
    text = "".join(c.choices[0].delta.content for c in chunks)
    assert text == unary.choices[0].message.content
    assert len(chunks) < 50

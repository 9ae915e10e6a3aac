"""The gateway core: one handler per RPC, named after it in snake_case.

Each handler takes the RPC's proto request and the transport-neutral Call, admits the
caller, validates, runs, and returns the proto response (or yields stream chunks).
It knows nothing of gRPC or HTTP; both transports call these same handlers.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from google.protobuf import struct_pb2

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
from server import validation
from server.auth import Admission
from server.call import Call
from server.catalog import Catalog
from server.config import Config
from server.engine import Run
from server.errors import InvalidArgument


class Gateway:
    def __init__(self, config: Config, catalog: Catalog, admission: Admission) -> None:
        self.config = config
        self.catalog = catalog
        self.admission = admission

    # -- interface A -----------------------------------------------------------------

    async def create_chat_completion(
        self, request: chat.CreateChatCompletionRequest, call: Call
    ) -> chat.CreateChatCompletionResponse:
        run = await self._start_model(request, validation.chat, call)
        text = await run.text()
        return chat.CreateChatCompletionResponse(
            id=f"chatcmpl-{call.request_id}",
            object="chat.completion",
            created=int(time.time()),
            model=run.model.id,
            choices=[
                chat.ChatChoice(
                    index=0,
                    message=chat.ChatMessage(role="assistant", content=text),
                    finish_reason=run.finish_reason,
                )
            ],
            usage=run.usage(),
        )

    async def stream_chat_completion(
        self, request: chat.StreamChatCompletionRequest, call: Call
    ) -> AsyncIterator[chat.StreamChatCompletionResponse]:
        run = await self._start_model(request, validation.chat, call)
        head = dict(id=f"chatcmpl-{call.request_id}", object="chat.completion.chunk",
                    created=int(time.time()), model=run.model.id)  # fmt: skip
        yield chat.StreamChatCompletionResponse(
            **head, choices=[chat.ChatChunkChoice(index=0, delta=chat.ChatDelta(role="assistant"))]
        )
        async for text in run.deltas():
            delta = chat.ChatDelta(content=text)
            yield chat.StreamChatCompletionResponse(
                **head, choices=[chat.ChatChunkChoice(index=0, delta=delta)]
            )
        last = chat.StreamChatCompletionResponse(
            **head,
            choices=[
                chat.ChatChunkChoice(
                    index=0, delta=chat.ChatDelta(), finish_reason=run.finish_reason
                )
            ],
        )
        if request.stream_options.include_usage:
            last.usage.CopyFrom(run.usage())
        yield last

    async def create_completion(
        self, request: completion.CreateCompletionRequest, call: Call
    ) -> completion.CreateCompletionResponse:
        run = await self._start_model(request, validation.completion, call)
        text = await run.text()
        return completion.CreateCompletionResponse(
            id=f"cmpl-{call.request_id}",
            object="text_completion",
            created=int(time.time()),
            model=run.model.id,
            choices=[completion.CompletionChoice(index=0, text=text, finish_reason=run.finish_reason)],
            usage=run.usage(with_ttft=False),
        )

    async def stream_completion(
        self, request: completion.StreamCompletionRequest, call: Call
    ) -> AsyncIterator[completion.StreamCompletionResponse]:
        run = await self._start_model(request, validation.completion, call)
        head = dict(id=f"cmpl-{call.request_id}", object="text_completion",
                    created=int(time.time()), model=run.model.id)  # fmt: skip
        async for text in run.deltas():
            choice = completion.CompletionChoice(index=0, text=text)
            yield completion.StreamCompletionResponse(**head, choices=[choice])
        last = completion.StreamCompletionResponse(
            **head, choices=[completion.CompletionChoice(index=0, finish_reason=run.finish_reason)]
        )
        if request.stream_options.include_usage:
            last.usage.CopyFrom(run.usage())
        yield last

    async def list_models(
        self, request: models.ListModelsRequest, call: Call
    ) -> models.ListModelsResponse:
        self.admission.admit(call.metadata, "api", call.response_metadata)
        return models.ListModelsResponse(
            object="list",
            data=[
                models.Model(id=m.id, object="model", created=m.created, owned_by=m.owned_by)
                for m in self.config.models
            ],
        )

    async def list_providers(
        self, request: providers.ListProvidersRequest, call: Call
    ) -> providers.ListProvidersResponse:
        self.admission.admit(call.metadata, "api", call.response_metadata)
        if not request.model:
            raise InvalidArgument.for_field("model", "is required")
        model = self.catalog.model(request.model)
        result = providers.ListProvidersResponse()
        for upstream in self.catalog.upstreams[model.id]:
            params = struct_pb2.Struct()
            params.update(upstream.config.params)
            result.providers.append(
                providers.Provider(
                    id=upstream.id,
                    type=upstream.config.type,
                    enabled=upstream.config.enabled,
                    params=params,
                    adapter=upstream.config.adapter,
                    health=upstream.health,
                )
            )
        return result

    # -- interface B -----------------------------------------------------------------

    async def infer(self, request: router.InferRequest, call: Call) -> router.InferResponse:
        run, route = await self._start_profile(request, call)
        text = await run.text()
        return router.InferResponse(
            id=f"cmpl-{call.request_id}",
            object="text_completion",
            created=int(time.time()),
            model=run.model.id,
            choices=[completion.CompletionChoice(index=0, text=text, finish_reason=run.finish_reason)],
            usage=run.usage(),
            route=route,
        )

    async def stream_infer(
        self, request: router.StreamInferRequest, call: Call
    ) -> AsyncIterator[router.StreamInferResponse]:
        run, route = await self._start_profile(request, call)
        head = dict(id=f"cmpl-{call.request_id}", object="text_completion",
                    created=int(time.time()), model=run.model.id)  # fmt: skip
        first = True
        async for text in run.deltas():
            chunk = router.StreamInferResponse(
                **head, choices=[completion.CompletionChoice(index=0, text=text)]
            )
            if first:
                chunk.route.CopyFrom(route)
                first = False
            yield chunk
        last = router.StreamInferResponse(
            **head, choices=[completion.CompletionChoice(index=0, finish_reason=run.finish_reason)]
        )
        if first:
            last.route.CopyFrom(route)
        if request.stream_options.include_usage:
            last.usage.CopyFrom(run.usage())
        yield last

    async def list_deployments(
        self, request: deployment.ListDeploymentsRequest, call: Call
    ) -> deployment.ListDeploymentsResponse:
        self.admission.admit(call.metadata, "router", call.response_metadata)
        return deployment.ListDeploymentsResponse(
            object="list",
            data=[
                deployment.Deployment(
                    id=d.id, object="deployment", model=d.model, description=d.description
                )
                for d in self.config.deployments
            ],
        )

    async def invoke_deployment(
        self, request: deployment.InvokeDeploymentRequest, call: Call
    ) -> deployment.InvokeDeploymentResponse:
        run, hf_format = await self._start_deployment(request, call)
        text = await run.text()
        response = deployment.InvokeDeploymentResponse(
            id=f"cmpl-{call.request_id}",
            object="text_completion",
            created=int(time.time()),
            model=run.model.id,
            deployment_id=request.deployment_id,
            choices=[completion.CompletionChoice(index=0, text=text, finish_reason=run.finish_reason)],
            usage=run.usage(),
        )
        if hf_format:
            response.generated_text = text
            response.details.CopyFrom(_details(run))
        return response

    async def stream_invoke_deployment(
        self, request: deployment.StreamInvokeDeploymentRequest, call: Call
    ) -> AsyncIterator[deployment.StreamInvokeDeploymentResponse]:
        run, hf_format = await self._start_deployment(request, call)
        head = dict(id=f"cmpl-{call.request_id}", object="text_completion",
                    created=int(time.time()), model=run.model.id,
                    deployment_id=request.deployment_id)  # fmt: skip
        index = 0
        async for text in run.deltas():
            chunk = deployment.StreamInvokeDeploymentResponse(
                **head, choices=[completion.CompletionChoice(index=0, text=text)]
            )
            if hf_format:
                chunk.token.CopyFrom(deployment.GeneratedToken(id=index, text=text))
            index += 1
            yield chunk
        last = deployment.StreamInvokeDeploymentResponse(
            **head, choices=[completion.CompletionChoice(index=0, finish_reason=run.finish_reason)]
        )
        if hf_format:
            last.generated_text = run.generated_text
            last.details.CopyFrom(_details(run))
        if request.stream_options.include_usage:
            last.usage.CopyFrom(run.usage())
        yield last

    # -- shared steps ----------------------------------------------------------------

    async def _start_model(self, request, validate, call: Call) -> Run:  # type: ignore[no-untyped-def]
        self.admission.admit(call.metadata, "api", call.response_metadata)
        generation = validate(request)
        model = self.catalog.model(request.model)
        run = Run(self.catalog.upstreams[model.id], generation, call.deadline)
        await run.open(f"model {model.id}")
        return run

    async def _start_profile(self, request, call: Call) -> tuple[Run, router.RouteDecision]:  # type: ignore[no-untyped-def]
        self.admission.admit(call.metadata, "router", call.response_metadata)
        generation, asked = validation.infer(request)
        profile = asked or self.config.routing.default_profile
        ranked = self.config.routing.profiles[profile]
        run = Run([u for m in ranked for u in self.catalog.upstreams[m]], generation, call.deadline)
        await run.open(f"profile {profile}")
        preferred = run.model.id == ranked[0]
        reason = (
            f"first choice of the {profile} profile"
            if preferred
            else f"fallback: preferred models of the {profile} profile failed"
        )
        return run, router.RouteDecision(profile=profile, model=run.model.id, reason=reason)

    async def _start_deployment(self, request, call: Call) -> tuple[Run, bool]:  # type: ignore[no-untyped-def]
        self.admission.admit(call.metadata, "router", call.response_metadata)
        generation, hf_format = validation.invocation(request)
        target = self.catalog.deployment(request.deployment_id)
        run = Run(self.catalog.upstreams[target.model], generation, call.deadline)
        await run.open(f"deployment {target.id}")
        return run, hf_format


def _details(run: Run) -> deployment.GenerationDetails:
    return deployment.GenerationDetails(
        finish_reason=run.finish_reason, generated_tokens=run.counts().completion_tokens
    )

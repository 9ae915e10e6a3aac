"""The gateway core: one handler per RPC, named after it in snake_case.

Each handler takes the RPC's proto request and the transport-neutral Call, admits the
caller, validates, runs, and returns the proto response (or yields stream chunks).
It knows nothing of gRPC or HTTP; both transports call these same handlers.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

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
from google.protobuf import struct_pb2

from server import budget, tokens, validation
from server.admin import AdminHandlers
from server.auth import Admission, Principal
from server.budget import BudgetSpec, MemoryBudgets
from server.call import Call
from server.catalog import Catalog
from server.config import Config, KeyKind, Price
from server.engine import Run
from server.errors import InvalidArgument
from server.generation import GenerationRequest
from server.ledger import Accounts, Ledger, Tab
from server.store import Store


def accounted(handler: Any) -> Any:
    """Opens a Tab for each call of an RPC handler and closes it when the call ends,
    however it ends: the Tab settles what the call reserved and writes its ledger row.
    The handler receives the Tab as a third argument."""
    method = "".join(part.title() for part in handler.__name__.split("_"))

    if inspect.isasyncgenfunction(handler):

        @functools.wraps(handler)
        async def stream(self: Gateway, request: Any, call: Call) -> AsyncIterator[Any]:
            tab = self.accounts.open(call.request_id, method)
            error: BaseException | None = None
            try:
                async for chunk in handler(self, request, call, tab):
                    yield chunk
            except BaseException as exc:
                error = exc
                raise
            finally:
                tab.close(error)

        return stream

    @functools.wraps(handler)
    async def unary(self: Gateway, request: Any, call: Call) -> Any:
        tab = self.accounts.open(call.request_id, method)
        try:
            response = await handler(self, request, call, tab)
        except BaseException as exc:
            tab.close(exc)
            raise
        tab.close(None)
        return response

    return unary


class Gateway:
    def __init__(
        self,
        config: Config,
        catalog: Catalog,
        admission: Admission,
        accounts: Accounts | None = None,
        store: Store | None = None,
        closers: list[Callable[[], Awaitable[None]]] | None = None,
    ) -> None:
        self.config = config
        self.catalog = catalog
        self.admission = admission
        self.accounts = accounts or Accounts(
            Ledger(None), admission.limiter, MemoryBudgets(_nothing_spent)
        )
        self.store = store
        self.admin = AdminHandlers(self.admission, self.accounts, store)
        self._closers = closers or []

    # -- interface A -----------------------------------------------------------------

    @accounted
    async def create_chat_completion(
        self, request: chat.CreateChatCompletionRequest, call: Call, tab: Tab
    ) -> chat.CreateChatCompletionResponse:
        run = await self._start_model(request, validation.chat, call, tab)
        text = await run.text()
        return chat.CreateChatCompletionResponse(
            **_head(call, run, "chat.completion"),
            choices=[
                chat.ChatChoice(
                    index=0,
                    message=chat.ChatMessage(role="assistant", content=text),
                    finish_reason=run.finish_reason,
                )
            ],
            usage=run.usage(),
        )

    @accounted
    async def stream_chat_completion(
        self, request: chat.StreamChatCompletionRequest, call: Call, tab: Tab
    ) -> AsyncIterator[chat.StreamChatCompletionResponse]:
        run = await self._start_model(request, validation.chat, call, tab)
        head = _head(call, run, "chat.completion.chunk")
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

    @accounted
    async def create_completion(
        self, request: completion.CreateCompletionRequest, call: Call, tab: Tab
    ) -> completion.CreateCompletionResponse:
        run = await self._start_model(request, validation.completion, call, tab)
        text = await run.text()
        return completion.CreateCompletionResponse(
            **_head(call, run, "text_completion"),
            choices=[_text_choice(text, run.finish_reason)],
            usage=run.usage(with_ttft=False),
        )

    @accounted
    async def stream_completion(
        self, request: completion.StreamCompletionRequest, call: Call, tab: Tab
    ) -> AsyncIterator[completion.StreamCompletionResponse]:
        run = await self._start_model(request, validation.completion, call, tab)
        head = _head(call, run, "text_completion")
        async for text in run.deltas():
            choice = _text_choice(text)
            yield completion.StreamCompletionResponse(**head, choices=[choice])
        last = completion.StreamCompletionResponse(
            **head, choices=[_text_choice("", run.finish_reason)]
        )
        if request.stream_options.include_usage:
            last.usage.CopyFrom(run.usage())
        yield last

    @accounted
    async def list_models(
        self, request: models.ListModelsRequest, call: Call, tab: Tab
    ) -> models.ListModelsResponse:
        await self._admit(call, tab, "api")
        return models.ListModelsResponse(
            object="list",
            data=[
                models.Model(id=m.id, object="model", created=m.created, owned_by=m.owned_by)
                for m in self.config.models
            ],
        )

    @accounted
    async def list_providers(
        self, request: providers.ListProvidersRequest, call: Call, tab: Tab
    ) -> providers.ListProvidersResponse:
        await self._admit(call, tab, "api")
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

    @accounted
    async def infer(
        self, request: router.InferRequest, call: Call, tab: Tab
    ) -> router.InferResponse:
        run, route = await self._start_profile(request, call, tab)
        text = await run.text()
        return router.InferResponse(
            **_head(call, run, "text_completion"),
            choices=[_text_choice(text, run.finish_reason)],
            usage=run.usage(),
            route=route,
        )

    @accounted
    async def stream_infer(
        self, request: router.StreamInferRequest, call: Call, tab: Tab
    ) -> AsyncIterator[router.StreamInferResponse]:
        run, route = await self._start_profile(request, call, tab)
        head = _head(call, run, "text_completion")
        first = True
        async for text in run.deltas():
            chunk = router.StreamInferResponse(**head, choices=[_text_choice(text)])
            if first:
                chunk.route.CopyFrom(route)
                first = False
            yield chunk
        last = router.StreamInferResponse(**head, choices=[_text_choice("", run.finish_reason)])
        if first:
            last.route.CopyFrom(route)
        if request.stream_options.include_usage:
            last.usage.CopyFrom(run.usage())
        yield last

    @accounted
    async def list_deployments(
        self, request: deployment.ListDeploymentsRequest, call: Call, tab: Tab
    ) -> deployment.ListDeploymentsResponse:
        await self._admit(call, tab, "router")
        return deployment.ListDeploymentsResponse(
            object="list",
            data=[
                deployment.Deployment(
                    id=d.id, object="deployment", model=d.model, description=d.description
                )
                for d in self.config.deployments
            ],
        )

    @accounted
    async def invoke_deployment(
        self, request: deployment.InvokeDeploymentRequest, call: Call, tab: Tab
    ) -> deployment.InvokeDeploymentResponse:
        run, hf_format = await self._start_deployment(request, call, tab)
        text = await run.text()
        response = deployment.InvokeDeploymentResponse(
            **_head(call, run, "text_completion"),
            deployment_id=request.deployment_id,
            choices=[_text_choice(text, run.finish_reason)],
            usage=run.usage(),
        )
        if hf_format:
            response.generated_text = text
            response.details.CopyFrom(_details(run))
        return response

    @accounted
    async def stream_invoke_deployment(
        self, request: deployment.StreamInvokeDeploymentRequest, call: Call, tab: Tab
    ) -> AsyncIterator[deployment.StreamInvokeDeploymentResponse]:
        run, hf_format = await self._start_deployment(request, call, tab)
        head = _head(call, run, "text_completion", deployment_id=request.deployment_id)
        index = 0
        async for text in run.deltas():
            chunk = deployment.StreamInvokeDeploymentResponse(**head, choices=[_text_choice(text)])
            if hf_format:
                chunk.token.CopyFrom(deployment.GeneratedToken(id=index, text=text))
            index += 1
            yield chunk
        last = deployment.StreamInvokeDeploymentResponse(
            **head, choices=[_text_choice("", run.finish_reason)]
        )
        if hf_format:
            last.generated_text = run.generated_text
            last.details.CopyFrom(_details(run))
        if request.stream_options.include_usage:
            last.usage.CopyFrom(run.usage())
        yield last

    # -- shared steps ----------------------------------------------------------------

    async def _admit(self, call: Call, tab: Tab, kind: KeyKind) -> Principal:
        """Authenticates and counts a request that generates nothing."""
        tab.principal = await self.admission.identify(call.metadata, kind)
        await self.admission.limit(tab.principal, 0, tab.ticket, call.response_metadata)
        return tab.principal

    async def _charge(
        self, call: Call, tab: Tab, generation: GenerationRequest, prices: list[Price | None]
    ) -> None:
        """Counts a generation against its key's rate limits (its prompt plus the most it
        may generate, in tokens) and reserves its maximum cost against the key's budget."""
        principal = tab.principal
        assert principal is not None
        default_max = self.config.limits.default_max_tokens
        want = tokens.estimate_prompt(generation) + (generation.max_tokens or default_max)
        await self.admission.limit(principal, want, tab.ticket, call.response_metadata)
        tab.limited_tokens = bool(principal.tokens_per_minute)
        if principal.budget_usd is not None:
            spec = BudgetSpec(
                principal.key_id, principal.name, principal.budget_usd, principal.budget_period
            )
            amount = budget.max_cost(prices, generation, default_max)
            tab.reservation = await self.accounts.budgets.reserve(spec, amount)

    async def _start_model(self, request, validate, call: Call, tab: Tab) -> Run:
        tab.principal = await self.admission.identify(call.metadata, "api")
        tab.model = request.model
        generation = validate(request)
        model = self.catalog.model(request.model)
        await self._charge(call, tab, generation, [model.price])
        run = tab.run = Run(self.catalog.upstreams[model.id], generation, call.deadline)
        await run.open(f"model {model.id}")
        return run

    async def _start_profile(
        self, request, call: Call, tab: Tab
    ) -> tuple[Run, router.RouteDecision]:
        tab.principal = await self.admission.identify(call.metadata, "router")
        generation, asked = validation.infer(request)
        profile = asked or self.config.routing.default_profile
        ranked = self.config.routing.profiles[profile]  # type: ignore[index]
        await self._charge(call, tab, generation, [self.catalog.model(m).price for m in ranked])
        run = tab.run = Run(
            [u for m in ranked for u in self.catalog.upstreams[m]], generation, call.deadline
        )
        await run.open(f"profile {profile}")
        preferred = run.model.id == ranked[0]
        reason = (
            f"first choice of the {profile} profile"
            if preferred
            else f"fallback: preferred models of the {profile} profile failed"
        )
        return run, router.RouteDecision(profile=profile, model=run.model.id, reason=reason)

    async def _start_deployment(self, request, call: Call, tab: Tab) -> tuple[Run, bool]:
        tab.principal = await self.admission.identify(call.metadata, "router")
        generation, hf_format = validation.invocation(request)
        target = self.catalog.deployment(request.deployment_id)
        tab.model = target.model
        await self._charge(call, tab, generation, [self.catalog.model(target.model).price])
        run = tab.run = Run(self.catalog.upstreams[target.model], generation, call.deadline)
        await run.open(f"deployment {target.id}")
        return run, hf_format

    async def aclose(self) -> None:
        """Closes providers, waits for settlements, drains the ledger, closes storage."""
        await self.catalog.aclose()
        await self.accounts.aclose()
        await self.accounts.ledger.aclose(self.config.ledger.drain_timeout_s)
        for closer in self._closers:
            await closer()


def _head(call: Call, run: Run, kind: str, **extra: Any) -> dict[str, Any]:
    """The fields every response and chunk of one call starts with."""
    prefix = "chatcmpl" if kind.startswith("chat.") else "cmpl"
    return dict(
        id=f"{prefix}-{call.request_id}",
        object=kind,
        created=int(time.time()),
        model=run.model.id,
        **extra,
    )


def _text_choice(text: str, finish_reason: str | None = None) -> completion.CompletionChoice:
    return completion.CompletionChoice(index=0, text=text, finish_reason=finish_reason)


def _details(run: Run) -> deployment.GenerationDetails:
    return deployment.GenerationDetails(
        finish_reason=run.finish_reason, generated_tokens=run.counts().completion_tokens
    )


async def _nothing_spent(key_id: str, since: float) -> float:
    return 0.0

"""The core handlers: one per RPC of the completion and routing interfaces.

Each handler takes the RPC's proto request and the transport-neutral Call (whose tab
the accounting middleware opened), admits the caller, validates, runs, and returns the
proto response (or yields stream chunks). It knows nothing of gRPC or HTTP; both
transports reach it through the pipeline (server/base/pipeline.py, bound in
server/application/rpcs.py).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from gateway.v1 import (
    chat_service_pb2 as chat,
)
from gateway.v1 import completion_pb2
from gateway.v1 import (
    completion_service_pb2 as completion,
)
from gateway.v1 import (
    deployment_service_pb2 as deployment,
)
from gateway.v1 import (
    embedding_service_pb2 as embeddings,
)
from gateway.v1 import feedback_service_pb2 as feedback
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

from server.accounting import budget
from server.accounting.admission import Admission, Principal
from server.accounting.budget import BudgetSpec, MemoryBudgets
from server.accounting.ledger import Ledger
from server.accounting.tab import Accounting, Accounts, Tab
from server.application import replies, textgen, validation
from server.application.admin import AdminHandlers
from server.application.catalog import Catalog
from server.application.control import Control
from server.application.dashboard import Dashboard
from server.application.embedding_run import EmbeddingRun, encode
from server.application.engine import Run
from server.base import tokens
from server.base.call import Call
from server.base.config import Config, KeyKind, Price
from server.base.embedding import embedders, estimate_tokens
from server.base.embedding import validate as validate_embeddings
from server.base.errors import InvalidArgument, NotFound
from server.base.generation import GenerationRequest, TextDelta
from server.base.pipeline import Middleware
from server.routing.policies import build_router
from server.routing.router import Router
from server.storage import Store


class Gateway:
    def __init__(
        self,
        config: Config,
        catalog: Catalog,
        admission: Admission,
        accounts: Accounts | None = None,
        store: Store | None = None,
        closers: list[Callable[[], Awaitable[None]]] | None = None,
        router: Router | None = None,
    ) -> None:
        self.config = config
        self.catalog = catalog
        self.admission = admission
        self.accounts = accounts or Accounts(
            Ledger(None), admission.limiter, MemoryBudgets(_nothing_spent)
        )
        self.store = store
        self.admin = AdminHandlers(self.admission, self.accounts, store)
        self.router: Router = router or build_router(config, catalog)
        # Live configuration: reload, providers on and off (server/application/control.py).
        self.control = Control(self)
        # The admin page's data (server/application/dashboard.py).
        self.dashboard = Dashboard(self)
        # Every RPC passes through these, outermost first (see server/base/pipeline.py).
        self.middlewares: list[Middleware] = [Accounting(self.accounts)]
        self._closers = closers or []

    # -- interface A -----------------------------------------------------------------

    async def create_chat_completion(
        self, request: chat.CreateChatCompletionRequest, call: Call
    ) -> chat.CreateChatCompletionResponse:
        run = await self._start_model(request, validation.chat, call)
        await run.text()
        choices = []
        for i, gathered in enumerate(run.choices):
            message = chat.ChatMessage(
                role="assistant",
                content="".join(gathered.text),
                tool_calls=[replies.tool_call(c) for c in gathered.tool_calls],
            )
            choice = chat.ChatChoice(index=i, message=message, finish_reason=run.choice_finish(i))
            if run.request.logprobs:
                choice.logprobs.CopyFrom(replies.chat_logprobs(gathered.logprobs))
            choices.append(choice)
        return chat.CreateChatCompletionResponse(
            **_head(call, run, "chat.completion"), choices=choices, usage=run.usage()
        )

    async def stream_chat_completion(
        self, request: chat.StreamChatCompletionRequest, call: Call
    ) -> AsyncGenerator[chat.StreamChatCompletionResponse, None]:
        run = await self._start_model(request, validation.chat, call)
        head = _head(call, run, "chat.completion.chunk")
        for i in range(len(run.choices)):
            yield chat.StreamChatCompletionResponse(
                **head,
                choices=[chat.ChatChunkChoice(index=i, delta=chat.ChatDelta(role="assistant"))],
            )
        async for event in run.events():
            choice = replies.chat_chunk_choice(event, run.request.logprobs)
            yield chat.StreamChatCompletionResponse(**head, choices=[choice])
        for i in range(len(run.choices)):
            last = chat.StreamChatCompletionResponse(
                **head,
                choices=[
                    chat.ChatChunkChoice(
                        index=i, delta=chat.ChatDelta(), finish_reason=run.choice_finish(i)
                    )
                ],
            )
            if i == len(run.choices) - 1 and request.stream_options.include_usage:
                last.usage.CopyFrom(run.usage())
            yield last

    async def create_completion(
        self, request: completion.CreateCompletionRequest, call: Call
    ) -> completion.CreateCompletionResponse:
        run = await self._start_model(request, validation.completion, call)
        await run.text()
        echo = (run.request.prompt or "") if run.request.echo else ""
        choices = []
        for i, gathered in enumerate(run.choices):
            choice = _text_choice(echo + "".join(gathered.text), run.choice_finish(i), i)
            if run.request.logprobs:
                choice.logprobs.CopyFrom(replies.completion_logprobs(gathered.logprobs))
            choices.append(choice)
        return completion.CreateCompletionResponse(
            **_head(call, run, "text_completion"),
            choices=choices,
            usage=run.usage(with_ttft=False),
        )

    async def stream_completion(
        self, request: completion.StreamCompletionRequest, call: Call
    ) -> AsyncGenerator[completion.StreamCompletionResponse, None]:
        run = await self._start_model(request, validation.completion, call)
        head = _head(call, run, "text_completion")
        if run.request.echo:
            for i in range(len(run.choices)):
                choice = _text_choice(run.request.prompt or "", None, i)
                yield completion.StreamCompletionResponse(**head, choices=[choice])
        async for event in run.events():
            if not isinstance(event, TextDelta):
                continue
            choice = _text_choice(event.text, None, event.choice)
            if run.request.logprobs:
                choice.logprobs.CopyFrom(replies.completion_logprobs(event.logprobs))
            yield completion.StreamCompletionResponse(**head, choices=[choice])
        for i in range(len(run.choices)):
            last = completion.StreamCompletionResponse(
                **head, choices=[_text_choice("", run.choice_finish(i), i)]
            )
            if i == len(run.choices) - 1 and request.stream_options.include_usage:
                last.usage.CopyFrom(run.usage())
            yield last

    async def list_models(
        self, request: models.ListModelsRequest, call: Call
    ) -> models.ListModelsResponse:
        await self._admit(call, "api")
        return models.ListModelsResponse(
            object="list",
            data=[
                models.Model(id=m.id, object="model", created=m.created, owned_by=m.owned_by)
                for m in self.config.models
            ],
        )

    async def get_model(
        self, request: models.GetModelRequest, call: Call
    ) -> models.GetModelResponse:
        await self._admit(call, "api")
        if not request.model:
            raise InvalidArgument.for_field("model", "is required")
        m = self.catalog.model(request.model)
        return models.GetModelResponse(
            id=m.id, object="model", created=m.created, owned_by=m.owned_by
        )

    async def create_embeddings(
        self, request: embeddings.CreateEmbeddingsRequest, call: Call
    ) -> embeddings.CreateEmbeddingsResponse:
        tab = _tab(call)
        tab.principal = await self.admission.identify(call.metadata, "api")
        tab.model = request.model
        wanted, encoding = validate_embeddings(request)
        model = self.catalog.model(request.model)
        upstreams = embedders(model, self.catalog.upstreams[model.id])
        # Input tokens only: an embedding generates none.
        prompt = estimate_tokens(wanted)
        await self._reserve(call, prompt, lambda: budget.input_cost(model.price, prompt))
        run = tab.run = EmbeddingRun(upstreams, wanted, call.deadline)
        result = await run.open(f"model {model.id}")
        return embeddings.CreateEmbeddingsResponse(
            object="list",
            data=[
                embeddings.Embedding(index=i, object="embedding", embedding=encode(v, encoding))
                for i, v in enumerate(result.vectors)
            ],
            model=model.id,
            usage=run.usage(),
        )

    async def list_providers(
        self, request: providers.ListProvidersRequest, call: Call
    ) -> providers.ListProvidersResponse:
        await self._admit(call, "api")
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
                    capabilities=sorted(upstream.capabilities),
                )
            )
        return result

    # -- interface B -----------------------------------------------------------------

    async def infer(self, request: router.InferRequest, call: Call) -> router.InferResponse:
        run, route = await self._start_profile(request, call)
        text = await run.text()
        return router.InferResponse(
            **_head(call, run, "text_completion"),
            choices=[_text_choice(text, run.finish_reason)],
            usage=run.usage(),
            route=route,
        )

    async def stream_infer(
        self, request: router.StreamInferRequest, call: Call
    ) -> AsyncGenerator[router.StreamInferResponse, None]:
        run, route = await self._start_profile(request, call)
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

    async def list_deployments(
        self, request: deployment.ListDeploymentsRequest, call: Call
    ) -> deployment.ListDeploymentsResponse:
        await self._admit(call, "router")
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
            **_head(call, run, "text_completion"),
            deployment_id=request.deployment_id,
            choices=[_text_choice(text, run.finish_reason)],
            usage=run.usage(),
        )
        if hf_format:
            response.generated_text = text
            response.details.CopyFrom(_details(run))
        return response

    async def stream_invoke_deployment(
        self, request: deployment.StreamInvokeDeploymentRequest, call: Call
    ) -> AsyncGenerator[deployment.StreamInvokeDeploymentResponse, None]:
        run, hf_format = await self._start_deployment(request, call)
        head = _head(call, run, "text_completion", deployment_id=request.deployment_id)
        if hf_format:
            async for chunk in _tgi_chunks(run, head, request.stream_options.include_usage):
                yield chunk
            return
        async for text in run.deltas():
            yield deployment.StreamInvokeDeploymentResponse(**head, choices=[_text_choice(text)])
        last = deployment.StreamInvokeDeploymentResponse(
            **head, choices=[_text_choice("", run.finish_reason)]
        )
        if request.stream_options.include_usage:
            last.usage.CopyFrom(run.usage())
        yield last

    async def generate_text(
        self, request: deployment.GenerateTextRequest, call: Call
    ) -> deployment.GenerateTextResponse:
        run, _ = await self._start_deployment(textgen.as_invocation(request), call)
        fragments = [text async for text in run.deltas()]
        return deployment.GenerateTextResponse(
            generations=[
                deployment.GeneratedText(
                    generated_text=run.generated_text, details=textgen.details(run, fragments)
                )
            ]
        )

    async def stream_generate_text(
        self, request: deployment.StreamGenerateTextRequest, call: Call
    ) -> AsyncGenerator[deployment.StreamGenerateTextResponse, None]:
        run, _ = await self._start_deployment(textgen.as_invocation(request), call)
        async for token, last in textgen.tokens(run):
            # TGI numbers its events from 1.
            event = deployment.StreamGenerateTextResponse(index=token.id + 1, token=token)
            if last:
                event.generated_text = run.generated_text
                event.details.CopyFrom(_details(run))
            yield event

    async def submit_feedback(
        self, request: feedback.SubmitFeedbackRequest, call: Call
    ) -> feedback.SubmitFeedbackResponse:
        principal = await self._admit(call, "router")
        request_id, score, label = validation.feedback(request)
        owner = self.accounts.ledger.pending_owner(request_id)
        if owner is None and self.store is not None:
            owner = await self.store.usage.owner(request_id)
        if owner != principal.key_id or self.store is None:
            raise NotFound(
                f"no request {request_id!r} of this key in the ledger", {"request_id": request_id}
            )
        await self.store.feedback.save(request_id, owner, score, label, request.comment)
        return feedback.SubmitFeedbackResponse(request_id=request_id, score=score)

    # -- shared steps ----------------------------------------------------------------

    async def _admit(self, call: Call, kind: KeyKind) -> Principal:
        """Authenticates and counts a request that generates nothing."""
        tab = _tab(call)
        tab.principal = await self.admission.identify(call.metadata, kind)
        await self.admission.limit(tab.principal, 0, tab.ticket, call.response_metadata)
        return tab.principal

    async def _charge(
        self, call: Call, generation: GenerationRequest, prices: list[Price | None]
    ) -> None:
        """Counts a generation against its key's rate limits (its prompt plus the most it
        may generate, in tokens) and reserves its maximum cost against the key's budget."""
        default_max = self.config.limits.default_max_tokens
        choices = max(generation.n, generation.best_of or 1)
        want = tokens.estimate_prompt(generation) + (generation.max_tokens or default_max) * choices
        await self._reserve(call, want, lambda: budget.max_cost(prices, generation, default_max))

    async def _reserve(self, call: Call, want: int, max_cost: Callable[[], float]) -> None:
        """Counts `want` tokens against the key's rate limits and reserves `max_cost()`
        against its budget (computed only for a key with one)."""
        tab = _tab(call)
        principal = tab.principal
        assert principal is not None
        await self.admission.limit(principal, want, tab.ticket, call.response_metadata)
        tab.limited_tokens = bool(principal.tokens_per_minute)
        if principal.budget_usd is not None:
            spec = BudgetSpec(
                principal.key_id, principal.name, principal.budget_usd, principal.budget_period
            )
            tab.reservation = await self.accounts.budgets.reserve(spec, max_cost())

    async def _start_model(self, request, validate, call: Call) -> Run:
        tab = _tab(call)
        tab.principal = await self.admission.identify(call.metadata, "api")
        tab.model = request.model
        generation = validate(request)
        model = self.catalog.model(request.model)
        await self._charge(call, generation, [model.price])
        run = tab.run = Run(self.catalog.upstreams[model.id], generation, call.deadline)
        await run.open(f"model {model.id}")
        return run

    async def _start_profile(self, request, call: Call) -> tuple[Run, router.RouteDecision]:
        tab = _tab(call)
        tab.principal = await self.admission.identify(call.metadata, "router")
        generation, asked = validation.infer(request)
        profile = asked or self.config.routing.default_profile
        route = self.router.route(generation, profile, await self._budget_left(tab.principal))
        tab.route_profile, tab.difficulty = route.profile, route.difficulty
        if self.config.routing.record_prompts:
            tab.prompt = generation.prompt
        ranked = route.models
        await self._charge(call, generation, [self.catalog.model(m).price for m in ranked])
        run = tab.run = Run(
            [u for m in ranked for u in self.catalog.upstreams[m]], generation, call.deadline
        )
        await run.open(f"profile {route.profile}")
        assert run.upstream is not None
        return run, route.decision(run.model.id, run.upstream.id)

    async def _budget_left(self, principal: Principal) -> float | None:
        """What the key may still spend this period; None when it has no budget."""
        if principal.budget_usd is None:
            return None
        spec = BudgetSpec(
            principal.key_id, principal.name, principal.budget_usd, principal.budget_period
        )
        spent, reserved = await self.accounts.budgets.status(spec)
        return principal.budget_usd - spent - reserved

    async def _start_deployment(self, request, call: Call) -> tuple[Run, bool]:
        tab = _tab(call)
        tab.principal = await self.admission.identify(call.metadata, "router")
        generation, hf_format = validation.invocation(request)
        target = self.catalog.deployment(request.deployment_id)
        tab.model = target.model
        await self._charge(call, generation, [self.catalog.model(target.model).price])
        run = tab.run = Run(self.catalog.upstreams[target.model], generation, call.deadline)
        await run.open(f"deployment {target.id}")
        return run, hf_format

    async def aclose(self) -> None:
        """Closes providers, waits for settlements, drains the ledger, closes storage."""
        await self.catalog.aclose()
        await self.control.aclose()
        await self.accounts.aclose()
        await self.accounts.ledger.aclose(self.config.ledger.drain_timeout_s)
        for closer in self._closers:
            await closer()


def _tab(call: Call) -> Tab:
    assert call.tab is not None, "the accounting middleware opens a tab for every call"
    return call.tab


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


def _text_choice(
    text: str, finish_reason: str | None = None, index: int = 0
) -> completion_pb2.CompletionChoice:
    return completion_pb2.CompletionChoice(index=index, text=text, finish_reason=finish_reason)


def _details(run: Run) -> deployment.GenerationDetails:
    return deployment.GenerationDetails(
        finish_reason=textgen.finish_reason(run),
        generated_tokens=run.counts().completion_tokens,
    )


async def _tgi_chunks(
    run: Run, head: dict[str, Any], include_usage: bool
) -> AsyncGenerator[deployment.StreamInvokeDeploymentResponse, None]:
    """An `inputs` stream as TGI sends it: a token in every chunk, the last one also
    carrying the finish reason, generated_text and details."""
    async for token, last in textgen.tokens(run):
        choice = _text_choice(token.text, run.finish_reason if last else None)
        chunk = deployment.StreamInvokeDeploymentResponse(**head, choices=[choice], token=token)
        if last:
            chunk.generated_text = run.generated_text
            chunk.details.CopyFrom(_details(run))
            if include_usage:
                chunk.usage.CopyFrom(run.usage())
        yield chunk


async def _nothing_spent(key_id: str, since: float) -> float:
    return 0.0

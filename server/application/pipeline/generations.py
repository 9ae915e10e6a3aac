"""The steps every generating handler takes, in order: admit the caller, validate the
request, reserve its worst case, open the run (failing over between providers).

Each step reads the snapshot the call started with (`Live.current`, read once), so a
reload in the middle of a call changes nothing the call sees.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol, TypeVar

from gateway.v1 import router_service_pb2 as router_pb

from server.accounting.accounts import Accounts
from server.application import validation
from server.application.pipeline import affinity, response_cache
from server.application.pipeline.affinity import Affinity
from server.application.pipeline.catalog import Upstream, spread
from server.application.pipeline.engine import Run
from server.application.pipeline.response_cache import ResponseCache
from server.application.pipeline.state import Live, Snapshot
from server.application.validation import InferRequest, InvokeRequest
from server.base import tokens
from server.base.call import Call
from server.base.caller import Principal
from server.base.config import ModelConfig, Price
from server.base.costs import max_cost
from server.base.errors import InvalidArgument
from server.base.generation import GenerationRequest
from server.base.spans import span


class NamesModel(Protocol):
    @property
    def model(self) -> str: ...


Asked = TypeVar("Asked", bound=NamesModel)
# Where a request that named a routing profile as its model says what was chosen.
ROUTE_HEADER = "x-gateway-route"


class Generations:
    def __init__(
        self, live: Live, accounts: Accounts, affinity: Affinity, responses: ResponseCache
    ) -> None:
        self.live = live
        self.accounts = accounts
        self.affinity = affinity
        self.responses = responses

    async def for_model(
        self, request: Asked, validate: Callable[[Asked], GenerationRequest], call: Call
    ) -> Run:
        """A run of the model the request names (interface A), by id or alias. A
        routing profile named as the model is routed as /v1/infer routes it; the
        decision goes back in the `x-gateway-route` header."""
        state = self.live.current
        principal = await self.accounts.identify(call, "api", state.keys)
        call.record.asked_for(request.model)
        generation = validate(request)
        if state.catalog.is_profile(request.model):
            run, decision = await self._routed(call, state, principal, generation, request.model)
            call.response_metadata[ROUTE_HEADER] = (
                f"profile={decision.profile}; model={decision.model}; "
                f"provider={decision.provider}; reason={decision.reason}"
            )
            return run
        model = state.catalog.model(request.model)
        _fits(generation, model)
        generation = await self._reserve(call, state, generation, [model.price])
        upstreams = state.catalog.upstreams[model.id]
        return await self._open(call, upstreams, generation, f"model {model.id}")

    async def for_profile(
        self, request: InferRequest, call: Call
    ) -> tuple[Run, router_pb.RouteDecision]:
        """A run of the model the router picks for the request's profile (interface B)."""
        state = self.live.current
        principal = await self.accounts.identify(call, "router", state.keys)
        generation, asked = validation.infer(request)
        profile = asked or state.config.routing.default_profile
        return await self._routed(call, state, principal, generation, profile)

    async def _routed(
        self,
        call: Call,
        state: Snapshot,
        principal: Principal,
        generation: GenerationRequest,
        profile: str,
    ) -> tuple[Run, router_pb.RouteDecision]:
        budget_left = await self.accounts.budget_left(principal)
        with span("gateway.routing", **{"gateway.profile": profile}) as current:
            # Keyed by key and request id, as feedback names its request.
            asker = f"{principal.key_id}/{call.request_id}"
            route = state.router.route(generation, profile, budget_left, asker)
            if current is not None:
                current.set_attribute("gateway.models", list(route.models))
        recorded = generation.prompt if state.config.routing.record_prompts else None
        call.record.routed(route.profile, route.difficulty, recorded)
        ranked = route.models
        catalog = state.catalog
        prices = [catalog.model(m).price for m in ranked]
        generation = await self._reserve(call, state, generation, prices)
        upstreams = [u for m in ranked for u in catalog.upstreams[m]]
        run = await self._open(call, upstreams, generation, f"profile {route.profile}")
        return run, route.decision(run.model.id, run.provider_id)

    async def for_deployment(self, request: InvokeRequest, call: Call) -> tuple[Run, bool]:
        """A run of a deployment's model; and whether the request came in TGI's
        `inputs` form."""
        state = self.live.current
        await self.accounts.identify(call, "router", state.keys)
        generation, hf_format = validation.invocation(request)
        target = state.catalog.deployment(request.deployment_id)
        call.record.asked_for(target.model)
        model = state.catalog.model(target.model)
        _fits(generation, model)
        generation = await self._reserve(call, state, generation, [model.price])
        upstreams = state.catalog.upstreams[target.model]
        return await self._open(call, upstreams, generation, f"deployment {target.id}"), hf_format

    async def _reserve(
        self, call: Call, state: Snapshot, generation: GenerationRequest, prices: list[Price | None]
    ) -> GenerationRequest:
        """Counts a generation against its key's rate limits (its prompt plus the most it
        may generate, in tokens) and reserves its maximum cost against the key's budget.
        Returns the generation to run: for a key with a budget, bounded to what the
        reservation covers."""
        default_max = state.config.limits.default_max_tokens
        principal = call.record.principal
        if generation.max_tokens is None and principal is not None and principal.budget:
            # Unbounded, one request could spend many times what it reserved.
            generation = dataclasses.replace(generation, max_tokens=default_max)
        choices = max(generation.n, generation.best_of or 1)
        want = tokens.estimate_prompt(generation) + (generation.max_tokens or default_max) * choices
        await self.accounts.reserve(call, want, lambda: max_cost(prices, generation, default_max))
        return generation

    async def _open(
        self, call: Call, upstreams: list[Upstream], generation: GenerationRequest, subject: str
    ) -> Run:
        """A run of the request: a stored answer when the response cache has one, else
        the first of `upstreams` that answers (kept by the cache when it takes part)."""
        state = self.live.current
        config = state.config.response_cache
        principal = call.record.principal
        cache = principal and response_cache.plan(
            config, principal, upstreams, generation, call.metadata, subject
        )
        if cache:
            stored = await self.responses.stored(cache, state.catalog)
            call.response_metadata[response_cache.HEADER] = "hit" if stored else "miss"
            if stored is not None:
                run = Run([stored], generation, call.deadline)
                run.response_cache, run.free = "hit", config.billing == "free"
                call.record.ran(run)
                await run.open(subject)
                return run
        run = await self._run(call, upstreams, generation, subject)
        if cache:
            run.response_cache = "miss"
            run.recorder = lambda events: self.responses.keep(cache, run.model.id, events)
        return run

    async def _run(
        self, call: Call, upstreams: list[Upstream], generation: GenerationRequest, subject: str
    ) -> Run:
        config = self.live.current.config.affinity
        key = self.affinity.key(config, generation, call.metadata, subject)
        upstreams, remembered = await self.affinity.ordered(key, spread(upstreams))
        run = Run(upstreams, generation, call.deadline)
        call.record.ran(run)
        await run.open(subject)
        if key is not None:
            run.affinity = affinity.outcome(remembered, run.provider_id)
            await self.affinity.remember(key, run.provider_id, config.ttl_s)
        return run


def _fits(generation: GenerationRequest, model: ModelConfig) -> None:
    """A prompt that cannot fit the model's context window is refused before any
    upstream is asked (and before it is billed)."""
    window = model.context_window
    if window is None:
        return
    prompt = tokens.estimate_prompt(generation)
    if prompt > window:
        field = "prompt" if generation.prompt is not None else "messages"
        raise InvalidArgument.for_field(
            field, f"holds about {prompt} tokens; model {model.id!r} takes {window} at most"
        )

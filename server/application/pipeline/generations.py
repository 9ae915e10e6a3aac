"""The steps every generating handler takes, in order: `admit` the caller (the key
identified once, the snapshot read once), the dialect translates its request into the
one GenerationRequest, then `run` it by model (`route` by profile, `deploy` to a
deployment): reserve its worst case and open the run, failing over between providers.

Every step after `admit` reads the snapshot the call started with, so a reload in the
middle of a call changes nothing the call sees.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from dataclasses import dataclass

from gateway.v1 import router_service_pb2 as router_pb

from server.accounting.accounts import QUEUE_HEADER, Accounts
from server.accounting.admission import check_model
from server.application.pipeline import affinity, fields, response_cache
from server.application.pipeline.affinity import Affinity
from server.application.pipeline.catalog import Upstream, spread
from server.application.pipeline.engine import Recorder, Run
from server.application.pipeline.operation_run import moderation_of
from server.application.pipeline.response_cache import ResponseCache
from server.application.pipeline.shadow import Shadows
from server.application.pipeline.state import Live, Snapshot
from server.base import tokens
from server.base.call import Call
from server.base.caller import Principal
from server.base.config import KeyKind, ModelConfig, Price
from server.base.costs import max_cost
from server.base.errors import AllProvidersFailed, InvalidArgument
from server.base.generation import GenerationRequest
from server.base.spans import span
from server.guardrails.guard import Guard
from server.guardrails.moderation import moderate, request_texts
from server.routing.scored import prompt_text

# Where a request that named a routing profile as its model says what was chosen.
ROUTE_HEADER = "x-gateway-route"


@dataclass(frozen=True, slots=True)
class Admitted:
    """A call whose caller is identified, with the snapshot it runs on."""

    call: Call
    state: Snapshot
    principal: Principal
    # The call's guardrails, once the models it may run on are known.
    guard: Guard | None = None


class Generations:
    def __init__(
        self, live: Live, accounts: Accounts, affinity: Affinity, responses: ResponseCache
    ) -> None:
        self.live = live
        self.accounts = accounts
        self.affinity = affinity
        self.responses = responses
        self.shadows = Shadows(accounts.ledger)

    async def admit(self, call: Call, kind: KeyKind, model: str | None = None) -> Admitted:
        """Identifies the caller by a key of `kind`, once, and reads the snapshot the
        call runs on. `model`, the model the request names, is recorded for the ledger
        even when the request is refused later."""
        state = self.live.current
        principal = await self.accounts.identify(call, kind, state.keys)
        if model is not None:
            call.record.asked_for(model)
        return Admitted(call, state, principal)

    async def run(self, admitted: Admitted, model: str, generation: GenerationRequest) -> Run:
        """A run of the model the request names (interface A), by id or alias. A
        routing profile named as the model is routed as /v1/infer routes it; the
        decision goes back in the `x-gateway-route` header."""
        call, catalog = admitted.call, admitted.state.catalog
        tags = fields.listed_tags(generation.metadata, call.metadata)
        if catalog.is_profile(model):
            run, decision = await self._routed(admitted, generation, model, tags)
            call.response_metadata[ROUTE_HEADER] = (
                f"profile={decision.profile}; model={decision.model}; "
                f"provider={decision.provider}; reason={decision.reason}"
            )
            return run
        config = catalog.model(model)
        return await self._one(admitted, config, generation, f"model {config.id}")

    async def route(
        self,
        admitted: Admitted,
        profile: str | None,
        generation: GenerationRequest,
        tags: tuple[str, ...] = (),
    ) -> tuple[Run, router_pb.RouteDecision]:
        """A run of the model the router picks for `profile` (interface B; absent: the
        config's default profile)."""
        chosen = profile or admitted.state.config.routing.default_profile
        return await self._routed(admitted, generation, chosen, tags)

    async def deploy(
        self, admitted: Admitted, deployment_id: str, generation: GenerationRequest
    ) -> Run:
        """A run of a deployment's model."""
        catalog = admitted.state.catalog
        target = catalog.deployment(deployment_id)
        admitted.call.record.asked_for(target.model)
        model = catalog.model(target.model)
        return await self._one(admitted, model, generation, f"deployment {target.id}")

    async def _one(
        self, admitted: Admitted, model: ModelConfig, generation: GenerationRequest, subject: str
    ) -> Run:
        """A run of one model's providers."""
        check_model(admitted.principal, model.id)
        admitted, generation = await _guarded(admitted, generation, [model])
        ceiling = admitted.state.config.limits.max_prompt_tokens
        _fits(generation, model.context_window or ceiling, f"model {model.id!r}")
        generation = await self._reserve(admitted, generation, [model.price])
        catalog = admitted.state.catalog
        run = await self._open(admitted, catalog.upstreams[model.id], generation, subject)
        if model.shadow is not None:  # the caller's answer has started: try the candidate
            candidates = catalog.upstreams.get(model.shadow.model, [])
            self.shadows.maybe(model.shadow, admitted.call, run, candidates, generation)
        return run

    async def _routed(
        self, admitted: Admitted, generation: GenerationRequest, profile: str, tags: tuple[str, ...]
    ) -> tuple[Run, router_pb.RouteDecision]:
        call, state, principal = admitted.call, admitted.state, admitted.principal
        _fits(generation, state.config.limits.max_prompt_tokens, "this gateway")
        budget_left = await self.accounts.budget_left(principal)
        with span("gateway.routing", **{"gateway.profile": profile}) as current:
            # Keyed by key and request id, as feedback names its request.
            asker = f"{principal.key_id}/{call.request_id}"
            route = state.router.route(generation, profile, budget_left, asker, tags)
            if current is not None:
                current.set_attribute("gateway.models", list(route.models))
        # The router's choice within what every level of the key allows.
        ranked = [m for m in route.models if principal.model_refused_by(m) is None]
        if not ranked:
            check_model(principal, route.models[0])
        catalog = state.catalog
        chosen = [catalog.model(m) for m in ranked]
        admitted, generation = await _guarded(admitted, generation, chosen)
        # The prompt as the guardrails leave it: the ledger keeps what the models read.
        recorded = prompt_text(generation) if state.config.routing.record_prompts else None
        call.record.routed(route.profile, route.difficulty, recorded, tags)
        prices = [catalog.model(m).price for m in ranked]
        generation = await self._reserve(admitted, generation, prices)
        upstreams = [u for m in ranked for u in catalog.upstreams[m]]
        run = await self._open(admitted, upstreams, generation, f"profile {route.profile}")
        return run, route.decision(run.model.id, run.provider_id)

    async def _reserve(
        self, admitted: Admitted, generation: GenerationRequest, prices: list[Price | None]
    ) -> GenerationRequest:
        """Counts a generation against its key's rate limits (its prompt plus the most it
        may generate, in tokens) and reserves its maximum cost against the budget of the
        key and of every level above it. Returns the generation to run: for a key under
        any budget, bounded to what the reservation covers."""
        default_max = admitted.state.config.limits.default_max_tokens
        if generation.max_tokens is None and admitted.principal.budgets:
            # Unbounded, one request could spend many times what it reserved.
            generation = dataclasses.replace(generation, max_tokens=default_max)
        choices = max(generation.n, generation.best_of or 1)
        want = tokens.estimate_prompt(generation) + (generation.max_tokens or default_max) * choices
        await self.accounts.reserve(
            admitted.call, want, lambda: max_cost(prices, generation, default_max)
        )
        return generation

    async def _open(
        self,
        admitted: Admitted,
        upstreams: list[Upstream],
        generation: GenerationRequest,
        subject: str,
    ) -> Run:
        """A run of the request: a stored answer when the response cache has one, else
        the first of `upstreams` that answers (kept by the cache when it takes part)."""
        call, state = admitted.call, admitted.state
        config = state.config.response_cache
        cache = response_cache.plan(
            config, admitted.principal, upstreams, generation, call.metadata, subject
        )
        if admitted.guard is not None and admitted.guard.reversible:
            # Its answer holds the caller's own values again: never kept for another.
            cache = None
        if cache:
            stored = await self.responses.stored(cache, state.catalog, generation)
            call.response_metadata[response_cache.HEADER] = "hit" if stored else "miss"
            if stored is not None:
                free = config.billing == "free"
                run = Run([stored], generation, call.deadline, response_cache="hit", free=free,
                          guard=admitted.guard)  # fmt: skip
                call.record.ran(run)
                await run.open(subject)
                return run
            keep = functools.partial(self.responses.keep, cache)
            return await self._run(admitted, upstreams, generation, subject, keep)
        return await self._run(admitted, upstreams, generation, subject)

    async def _run(
        self,
        admitted: Admitted,
        upstreams: list[Upstream],
        generation: GenerationRequest,
        subject: str,
        keep: Recorder | None = None,
    ) -> Run:
        """A run of the first of `upstreams` that answers; `keep`, when the response
        cache takes part, is given the finished answer."""
        call, config = admitted.call, admitted.state.config.affinity
        key = self.affinity.key(config, generation, call.metadata, subject)
        upstreams, remembered = await self.affinity.ordered(key, spread(upstreams))
        cached = None if keep is None else "miss"
        until: float | None = None
        while True:
            run = Run(upstreams, generation, call.deadline, response_cache=cached,
                      recorder=keep, guard=admitted.guard)  # fmt: skip
            call.record.ran(run)
            try:
                await run.open(subject)
                break
            except AllProvidersFailed as failure:
                # Every upstream is busy and said when to come back: a call that may wait
                # (`max_wait_s`) waits that long and tries again, in its deadline.
                wait = failure.retry_after_s
                if wait is None:
                    raise
                if until is None:
                    until = self.accounts.traffic.until(
                        admitted.principal, call.record.model, call.deadline
                    )
                if until is None or time.monotonic() + wait > until:
                    raise
                call.record.queue_s += await self.accounts.traffic.sleep(wait)
                call.response_metadata[QUEUE_HEADER] = str(round(call.record.queue_s * 1000))
        if key is not None:
            run.affinity = affinity.outcome(remembered, run.provider_id)
            await self.affinity.remember(key, run.provider_id, config.ttl_s)
        return run


async def _guarded(
    admitted: Admitted, generation: GenerationRequest, models: list[ModelConfig]
) -> tuple[Admitted, GenerationRequest]:
    """The call's guardrails (the default ones, its key's, those of every model it may
    run on), and the request as they leave it for any upstream (GuardrailBlocked when
    one blocks it)."""
    call = admitted.call
    guard = admitted.state.guardrails.guard(
        admitted.principal, models, call.metadata, not call.record.streaming,
        call.response_metadata,
    )  # fmt: skip
    if guard is None:
        return admitted, generation
    call.record.guardrails = guard
    if guard.slow:  # a model's scan: off the event loop
        generation = await asyncio.to_thread(guard.request, generation)
    else:
        generation = guard.request(generation)
    if guard.moderators:
        ask = moderation_of(admitted.state, call.deadline)
        await moderate(guard, request_texts(generation), ask)
    return dataclasses.replace(admitted, guard=guard), generation


def _fits(generation: GenerationRequest, window: int, holder: str) -> None:
    """A prompt that cannot fit the model's context window (or, for a model without
    one, the gateway's ceiling) is refused before any upstream is asked, and before
    anything is billed or stored."""
    prompt = tokens.estimate_prompt(generation)
    if prompt > window:
        field = "prompt" if generation.prompt is not None else "messages"
        raise InvalidArgument.for_field(
            field, f"holds about {prompt} tokens; {holder} takes {window} at most"
        )

"""Realtime sessions relayed to an upstream that serves OpenAI's Realtime API (OpenAI,
Azure OpenAI): which upstream a model's session goes to, and each response's account.

The façade carries the frames both ways (http_facade/realtime_relay.py); here is what
the gateway decides about them. A session goes to its model's first usable provider
when that provider's adapter serves the Realtime API (`realtime_socket`); elsewhere
the session is served by the gateway itself (http_facade/realtime.py). Each
`response.create` is metered as the pipeline meters a generation: the caller
identified, the response's tokens counted against its rate limits and its worst cost
reserved against the budget of its key and every level above it before the frame goes
upstream (BudgetExhausted naming the level otherwise), and one ledger row once the
upstream's `response.done` comes, its usage split as the upstream reports it (text and
audio, cached text and cached audio), each priced at its own rate.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from server.accounting.accounts import Accounts
from server.application.pipeline.catalog import Upstream
from server.application.pipeline.generations import Generations
from server.base import costs, tokens
from server.base.call import Call
from server.base.config import ModelConfig, Price
from server.base.costs import Cost
from server.base.errors import Cancelled, GatewayError, UpstreamError
from server.base.generation import TokenCounts
from server.guardrails.guard import Guard

# The ledger's method of a relayed Realtime response.
METHOD = "RealtimeResponse"


@dataclass(frozen=True, slots=True)
class Target:
    """Where a model's Realtime session is relayed: the upstream's socket URL, the
    headers that open it (its credentials, never the caller's key), and the upstream."""

    url: str
    headers: dict[str, str]
    upstream: Upstream

    @property
    def model(self) -> ModelConfig:
        return self.upstream.model

    @property
    def upstream_model(self) -> str:
        """The model's name at the upstream, which the gateway sets in the session."""
        return str(self.upstream.config.params.get("model") or self.model.id)


class RealtimeRelays:
    """The relay's decisions, over the gateway's current snapshot and its accounts."""

    def __init__(self, generations: Generations, accounts: Accounts) -> None:
        self.generations = generations
        self.accounts = accounts

    def target(self, model: str, opener: str = "realtime_socket") -> Target | None:
        """The upstream a session on `model` is relayed to; None when the gateway
        serves the session itself. `opener` names the adapters' method that says where
        their upstream serves the session's API (`live_socket`: Gemini's Live API)."""
        catalog = self.generations.live.current.catalog
        try:
            config = catalog.model(model)
        except GatewayError:
            return None
        for upstream in catalog.upstreams.get(config.id, []):
            if not upstream.usable:
                continue
            where = getattr(upstream.provider, opener, None)
            found = where() if where is not None else None
            return None if found is None else Target(found[0], found[1], upstream)
        return None

    async def guard(self, metadata: Mapping[str, str], target: Target) -> Guard | None:
        """The session's guardrails (the default ones, its key's and its model's)."""
        call = Call.with_timeout(metadata, None)
        admitted = await self.generations.admit(call, "api", target.model.id)
        state = admitted.state
        return state.guardrails.guard(
            admitted.principal, [target.model], metadata, False, call.response_metadata
        )

    async def response(
        self,
        metadata: Mapping[str, str],
        request_id: str,
        target: Target,
        prompt_tokens: int,
        max_output_tokens: int | None,
    ) -> Metered:
        """One response's account, its worst cost reserved (a GatewayError, its row
        written, when the key's limits or a budget cannot take it)."""
        call = Call.with_timeout(metadata, None, request_id)
        call.record.open(METHOD, streaming=True)
        metered = Metered(call, target, self.accounts)
        try:
            admitted = await self.generations.admit(call, "api", target.model.id)
            default_max = admitted.state.config.limits.default_max_tokens
            if max_output_tokens is None and admitted.principal.budgets:
                max_output_tokens = default_max  # the reservation bounds the response
            most = max_output_tokens or default_max
            metered.max_output_tokens = max_output_tokens
            await self.accounts.reserve(
                call, prompt_tokens + most,
                lambda: worst_cost(target.model.price, prompt_tokens, most),
            )  # fmt: skip
        except GatewayError as error:
            self.accounts.close(call, error)
            raise
        call.record.ran(metered)
        return metered


def worst_cost(price: Price | None, prompt_tokens: int, max_output_tokens: int) -> float:
    """The most a response can cost: every prompt token at the dearer of the text and
    audio input prices, every output token at the dearer of the output prices."""
    if price is None:
        return 0.0
    worst = 0.0
    for tier in (price.for_prompt(prompt_tokens), price.for_prompt(prompt_tokens * 2)):
        heard = max(tier.input, tier.audio_input or 0)
        said = max(tier.output, tier.reasoning or 0, tier.audio_output or 0)
        worst = max(worst, (prompt_tokens * heard + max_output_tokens * said) / costs.PER_MILLION)
    return worst


def counts_of(usage: Mapping[str, Any]) -> TokenCounts:
    """A Realtime `response.done`'s usage as the ledger counts it: cached tokens and
    audio among the input tokens, cached audio among both."""
    given = usage.get("input_token_details") or {}
    cached = given.get("cached_tokens_details") or {}
    said = usage.get("output_token_details") or {}
    return TokenCounts(
        prompt_tokens=_int(usage.get("input_tokens")),
        completion_tokens=_int(usage.get("output_tokens")),
        cached_tokens=_int(given.get("cached_tokens")),
        audio_input_tokens=_int(given.get("audio_tokens")),
        audio_output_tokens=_int(said.get("audio_tokens")),
        cached_audio_tokens=_int(cached.get("audio_tokens")),
        image_input_tokens=_int(given.get("image_tokens")),
    )


def live_counts(usage: Mapping[str, Any]) -> TokenCounts:
    """A Gemini Live turn's usageMetadata as the ledger counts it: audio by modality,
    thoughts among the output tokens."""
    thoughts = _int(usage.get("thoughtsTokenCount"))
    return TokenCounts(
        prompt_tokens=_int(usage.get("promptTokenCount")),
        completion_tokens=_int(usage.get("responseTokenCount")) + thoughts,
        cached_tokens=_int(usage.get("cachedContentTokenCount")),
        reasoning_tokens=thoughts,
        audio_input_tokens=_modality(usage.get("promptTokensDetails"), "AUDIO"),
        audio_output_tokens=_modality(usage.get("responseTokensDetails"), "AUDIO"),
        cached_audio_tokens=_modality(usage.get("cacheTokensDetails"), "AUDIO"),
    )


def _modality(details: Any, modality: str) -> int:
    return sum(
        _int(d.get("tokenCount"))
        for d in (details if isinstance(details, list) else [])
        if isinstance(d, dict) and d.get("modality") == modality
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def text_tokens(text: str) -> int:
    return tokens.estimate(text) if text else 0


class Metered:
    """One relayed response, as the ledger meters it (server/base/record.py Metered)."""

    def __init__(self, call: Call, target: Target, accounts: Accounts) -> None:
        self.call = call
        self.target = target
        self.accounts = accounts
        self.upstream_s = 0.0
        self.response_id = ""
        self.max_output_tokens: int | None = None
        self._counts: TokenCounts | None = None
        self._opened = time.perf_counter()
        self._first: float | None = None

    @property
    def started(self) -> bool:
        return self._counts is not None

    @property
    def model(self) -> ModelConfig:
        return self.target.model

    @property
    def provider_id(self) -> str:
        return self.target.upstream.id

    @property
    def response_cached(self) -> bool:
        return False

    def counts(self) -> TokenCounts:
        return self._counts or TokenCounts(0, 0)

    def cost(self, batch_factor: float | None = None) -> Cost | None:
        return costs.cost(self.counts(), self.model.price)  # never a batch line

    def billed(self) -> tuple[str, float]:
        return "tokens", self.counts().total_tokens

    def ttft_ms(self) -> float | None:
        return None if self._first is None else (self._first - self._opened) * 1000

    async def aclose(self) -> None:
        return None

    def began(self, response_id: str) -> None:
        """The upstream's `response.created`."""
        self.response_id = response_id
        self._first = time.perf_counter()

    def finish(self, response: Mapping[str, Any] | None, error: GatewayError | None = None) -> None:
        """The response is over (its `response.done`, or the session ended first):
        its reservation settles and its row is written, once."""
        if response is not None:
            self.counted(counts_of(response.get("usage") or {}), error or _failure(response))
        else:
            self.counted(None, error)

    def counted(self, counts: TokenCounts | None, error: GatewayError | None = None) -> None:
        """The response is over, having used `counts` (None: nothing known)."""
        self._counts = counts
        self.upstream_s = time.perf_counter() - self._opened
        self.call.record.response_id = self.response_id
        self.accounts.close(self.call, error)


def _failure(response: Mapping[str, Any]) -> GatewayError | None:
    status = response.get("status")
    details = response.get("status_details") or {}
    if status == "cancelled":
        return Cancelled(f"the response was cancelled ({details.get('reason') or 'upstream'})")
    if status == "failed":
        error = details.get("error") or {}
        message = error.get("message") if isinstance(error, dict) else None
        return UpstreamError(f"the upstream's response failed: {message or 'no reason given'}")
    return None

"""An embedding request in flight: dispatch with failover, timing, tokens and cost.

It answers the ledger's questions (`started`, `counts`, `cost`, `model`,
`provider_id`) as a generation's Run does, so the ledger, rate limits and budgets treat
both alike.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import struct
from collections.abc import AsyncIterator, Sequence

from gateway.v1 import usage_pb2
from google.protobuf import struct_pb2

from server.accounting.accounts import Accounts
from server.accounting.admission import check_model
from server.application.pipeline import dispatch
from server.application.pipeline.catalog import Upstream
from server.application.pipeline.state import Snapshot
from server.base import costs
from server.base.call import Call
from server.base.caller import Principal
from server.base.config import ModelConfig
from server.base.embedding import Embedder, EmbeddingRequest, Embeddings, estimate_tokens
from server.base.errors import InvalidArgument, UpstreamError
from server.base.generation import TokenCounts

CAPABILITY = "embeddings"


def embedders(model: ModelConfig, upstreams: Sequence[Upstream]) -> list[Upstream]:
    """The model's upstreams that can embed; InvalidArgument naming the capability and
    the model when none can."""
    able = [u for u in upstreams if isinstance(u.provider, Embedder)]
    if not able:
        raise InvalidArgument(
            f"model {model.id!r} does not support {CAPABILITY}: none of its providers "
            f"({', '.join(u.id for u in upstreams)}) can create them",
            {"field": "model", "model": model.id, "capability": CAPABILITY},
        )
    return able


class EmbeddingRun:
    # Embeddings are not kept in the response cache.
    response_cached = False

    def __init__(
        self, upstreams: Sequence[Upstream], request: EmbeddingRequest, deadline: float | None
    ) -> None:
        self.request = request
        self._upstreams = upstreams
        self._deadline = deadline
        self._clock = costs.Stopwatch()
        self.upstream: Upstream | None = None
        self.result: Embeddings | None = None
        self.upstream_s = 0.0

    @property
    def model(self) -> ModelConfig:
        assert self.upstream is not None, "open() first"
        return self.upstream.model

    @property
    def provider_id(self) -> str:
        return self.upstream.id if self.upstream is not None else ""

    @property
    def started(self) -> bool:
        return self.upstream is not None

    async def aclose(self) -> None:
        """Nothing runs once open() has returned: its one answer is closed there."""

    async def open(self, subject: str) -> Embeddings:
        """Embeds on the first upstream that answers with one vector per input."""
        self.upstream, answers = await dispatch.open_stream(
            self._upstreams, None, self._deadline, subject, start=self._start
        )
        result = await anext(aiter(answers))
        await answers.aclose()
        self.result = result  # type: ignore[assignment]
        self._clock.mark_first_token()
        return self.result  # type: ignore[return-value]

    def _start(self, upstream: Upstream) -> AsyncIterator[Embeddings]:
        return _one(upstream, self.request)

    def counts(self) -> TokenCounts:
        """The upstream's count when it gave one, else an estimate; no output tokens."""
        reported = self.result.prompt_tokens if self.result is not None else None
        return TokenCounts(estimate_tokens(self.request) if reported is None else reported, 0)

    def cost(self) -> costs.Cost | None:
        return costs.cost(self.counts(), self.model.price)

    def ttft_ms(self) -> float | None:
        return None  # nothing streams: latency alone describes an embedding call

    def usage(self) -> usage_pb2.Usage:
        return costs.usage(self.counts(), self.model.price, self._clock.elapsed_ms(), None)


async def embed(
    accounts: Accounts,
    state: Snapshot,
    call: Call,
    principal: Principal,
    model_name: str,
    wanted: EmbeddingRequest,
) -> EmbeddingRun:
    """Reserves the input's cost against the (identified) caller's budget, and embeds
    on the model's first upstream that answers, its input past the call's guardrails
    (every dialect's embeddings)."""
    call.record.asked_for(model_name)
    model = state.catalog.model(model_name)
    check_model(principal, model.id)
    guard = state.guardrails.guard(principal, [model], call.metadata, True, call.response_metadata)
    if guard is not None:
        call.record.guardrails = guard
        if guard.slow:  # a model's scan: off the event loop
            inputs = await asyncio.to_thread(guard.texts, wanted.inputs)
        else:
            inputs = guard.texts(wanted.inputs)
        wanted = dataclasses.replace(wanted, inputs=inputs)
        guard.report()
    upstreams = embedders(model, state.catalog.upstreams[model.id])
    # Input tokens only: an embedding generates none.
    prompt = estimate_tokens(wanted)
    await accounts.reserve(call, prompt, lambda: costs.input_cost(model.price, prompt))
    run = EmbeddingRun(upstreams, wanted, call.deadline)
    call.record.ran(run)
    await run.open(f"model {model.id}")
    return run


async def _one(upstream: Upstream, request: EmbeddingRequest) -> AsyncIterator[Embeddings]:
    """An embedding call as a one-event stream, so dispatch fails over as for text."""
    provider = upstream.provider
    assert isinstance(provider, Embedder)
    result = await provider.embed(request)
    if len(result.vectors) != len(request.inputs):
        raise UpstreamError(
            f"{upstream.id}: malformed answer ({len(result.vectors)} vectors for "
            f"{len(request.inputs)} inputs)",
            {"provider": upstream.id},
            upstream_answered=True,
        )
    yield result


def encode(vector: Sequence[float], encoding: str) -> struct_pb2.Value:
    """A vector as OpenAI writes it: numbers, or base64 of little-endian float32."""
    if encoding == "base64":
        packed = struct.pack(f"<{len(vector)}f", *vector)
        return struct_pb2.Value(string_value=base64.b64encode(packed).decode())
    numbers = struct_pb2.Value()
    numbers.list_value.extend(vector)
    return numbers
